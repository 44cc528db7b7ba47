// checkpoint/training_state.cpp — one state dict from a run's pieces and back (see
// checkpoint/training_state.h).
#include "checkpoint/training_state.h"

#include <vector>

#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/random.h"

namespace kiln::checkpoint {

namespace {

void add_prefixed(StateDict& out, const std::string& prefix, const StateDict& piece) {
  for (const auto& [name, value] : piece) out.insert(prefix + name, value);
}

/// The entries of `dict` under `prefix`, with the prefix taken off.
StateDict under(const StateDict& dict, const std::string& prefix) {
  StateDict out;
  for (const auto& [name, value] : dict) {
    if (name.rfind(prefix, 0) == 0) out.insert(name.substr(prefix.size()), value);
  }
  return out;
}

bool has_prefix(const StateDict& dict, const std::string& prefix) {
  for (const auto& [name, value] : dict) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

/// Checks that a piece is in both the state and the dict, or in neither; true when in both.
bool present(bool in_state, const StateDict& dict, const std::string& prefix, const char* piece) {
  const bool in_dict = has_prefix(dict, prefix);
  KILN_CHECK_VALUE(!in_dict || in_state, "checkpoint: it holds ", piece, " state, but no ", piece,
                   " was given to restore it into");
  KILN_CHECK_VALUE(in_dict || !in_state, "checkpoint: a ", piece, " was given to restore, but the checkpoint holds no ",
                   piece, " state (was it saved without one?)");
  return in_state;
}

}  // namespace

StateDict collect(const TrainingState& state) {
  StateDict dict;
  if (state.model) add_prefixed(dict, "model.", state.model->state_dict());
  if (state.optimizer) add_prefixed(dict, "optimizer.", state.optimizer->state_dict());
  if (state.scheduler) add_prefixed(dict, "scheduler.", state.scheduler->state_dict());
  // A disabled scaler has no state (PyTorch's behaviour); a marker keeps the piece visible.
  if (state.scaler) {
    add_prefixed(dict, "scaler.", state.scaler->state_dict());
    dict.insert("scaler.enabled", tensor(state.scaler->is_enabled()));
  }
  if (state.loader) add_prefixed(dict, "loader.", state.loader->state_dict());
  if (state.random_generators) {
    dict.insert("rng.cpu", get_rng_state());
    if (cuda::is_built()) dict.insert("rng.cuda", cuda::get_rng_state());
  }
  return dict;
}

void restore(TrainingState& state, const StateDict& dict) {
  // Check that the pieces match before changing any of them.
  const bool model = present(state.model != nullptr, dict, "model.", "model");
  const bool optimizer = present(state.optimizer != nullptr, dict, "optimizer.", "optimizer");
  const bool scheduler = present(state.scheduler != nullptr, dict, "scheduler.", "LR scheduler");
  const bool scaler = present(state.scaler != nullptr, dict, "scaler.", "GradScaler");
  const bool loader = present(state.loader != nullptr, dict, "loader.", "DataLoader");
  const bool rng = present(state.random_generators, dict, "rng.", "random generator");
  if (scaler) {
    const bool saved_enabled = dict.at("scaler.enabled").item<bool>();
    KILN_CHECK_VALUE(saved_enabled == state.scaler->is_enabled(), "checkpoint: the GradScaler was ",
                     saved_enabled ? "enabled" : "disabled", " when saved but is ",
                     state.scaler->is_enabled() ? "enabled" : "disabled", " here (mixed precision on in one run only?)");
  }
  if (model) state.model->load_state_dict(under(dict, "model."));
  if (optimizer) state.optimizer->load_state_dict(under(dict, "optimizer."));
  if (scheduler) state.scheduler->load_state_dict(under(dict, "scheduler."));
  if (scaler) {
    StateDict piece = under(dict, "scaler.");
    StateDict without_marker;
    for (const auto& [name, value] : piece) {
      if (name != "enabled") without_marker.insert(name, value);
    }
    state.scaler->load_state_dict(without_marker);
  }
  if (loader) state.loader->load_state_dict(under(dict, "loader."));
  if (rng) {
    set_rng_state(dict.at("rng.cpu"));
    if (const Tensor* cuda_state = dict.find("rng.cuda"); cuda_state && cuda::is_built()) {
      cuda::set_rng_state(*cuda_state);
    }
  }
}

}  // namespace kiln::checkpoint
