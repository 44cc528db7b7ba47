// nn/training_mode_guard.h — runs a model in one mode (train or eval) for a scope without
// changing the caller's: at the end every module gets back its own mode, so a submodule the
// caller had frozen in eval() inside a training model stays frozen. memory::plan (a step in the
// mode asked for) and onnx::export_model (the forward in eval mode) stand on it.
// Read next: nn/module.h (train(), eval()).
#pragma once

#include <utility>
#include <vector>

#include "nn/module.h"

namespace kiln::nn {

class TrainingModeGuard {
 public:
  TrainingModeGuard(Module& model, bool train) {
    for (Module* m : model.modules()) modes_.emplace_back(m, m->is_training());
    model.train(train);
  }
  ~TrainingModeGuard() {
    for (auto& [m, on] : modes_) m->train(on);
  }
  TrainingModeGuard(const TrainingModeGuard&) = delete;
  TrainingModeGuard& operator=(const TrainingModeGuard&) = delete;

 private:
  std::vector<std::pair<Module*, bool>> modes_;
};

}  // namespace kiln::nn
