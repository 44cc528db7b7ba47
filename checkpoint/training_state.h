// checkpoint/training_state.h — everything a training run needs to continue exactly, as one
// state dict: the model, the optimizer (moments, per-group hyperparameters), the LR schedule,
// the GradScaler, the DataLoader's position and the random generators, plus the loop's own
// numbers. PyTorch users build this dictionary by hand for torch.save; here it is one struct.
//
//   checkpoint::TrainingState state{.model = &model, .optimizer = &opt, .scheduler = &sched,
//                                   .loader = &loader, .values = {{"epoch", "3"}}};
//   checkpoint::CheckpointDir("runs/mlp").save(step, state);
//
// Read next: checkpoint/checkpoint_dir.h (where and how checkpoints are written).
#pragma once

#include <map>
#include <string>

#include "amp/grad_scaler.h"
#include "data/dataloader.h"
#include "nn/module.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"

namespace kiln::checkpoint {

/// The pieces of a run a checkpoint holds. Pieces left null are neither saved nor restored.
struct TrainingState {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  optim::LRScheduler* scheduler = nullptr;
  amp::GradScaler* scaler = nullptr;
  data::DataLoader* loader = nullptr;
  /// The CPU generator, and the CUDA one where Kiln is built with CUDA.
  bool random_generators = true;
  /// The loop's own numbers (epoch, step, running loss sums, ...), saved as metadata text.
  std::map<std::string, std::string> values{};
};

/// Every piece's state_dict under its prefix: "model.", "optimizer.", "scheduler.",
/// "scaler.", "loader.", and "rng.cpu" / "rng.cuda".
StateDict collect(const TrainingState& state);
/// Loads each piece of `state` from `dict` (a collect() result). A piece the dict lacks, or
/// a dict piece this state lacks, is an error naming it; so is any piece that does not fit.
void restore(TrainingState& state, const StateDict& dict);

}  // namespace kiln::checkpoint
