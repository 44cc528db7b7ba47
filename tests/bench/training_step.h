// tests/bench/training_step.h — the examples' SGD training step as the benchmarks run it,
// eagerly or compiled, in Float32 or under CPU autocast: what bench_training's step benchmarks
// time, and what the interleaved ratios (tests/bench/interleaved.h) set beside their floors.
// Read next: tests/bench/bench_training.cpp.
#pragma once

#include <functional>
#include <optional>

#include "kiln.h"

namespace kiln::bench {

struct TrainingStepOptions {
  /// The forward under CPU autocast (BFloat16) and the backward through a GradScaler: amp_train's step.
  bool mixed_precision = false;
  /// Captured by the first call and replayed by the later ones (kiln::compile).
  bool compiled = false;
};

/// SGD steps (lr 0.01, momentum 0.9) of `model` on fixed (x, y). Holds references to itself in
/// its step, so it stays where it was made.
class SgdTrainingStep {
 public:
  SgdTrainingStep(nn::Module& model, Tensor x, Tensor y, TrainingStepOptions options)
      : model_(model), x_(std::move(x)), y_(std::move(y)), mixed_precision_(options.mixed_precision),
        sgd_(model.parameters(), optim::SGDOptions(0.01).momentum(0.9)), scaler_({.enabled = options.mixed_precision}) {
    if (options.compiled) {
      compiled_.emplace(kiln::compile(std::function<Tensor(const Tensor&, const Tensor&)>(
          [this](const Tensor& input, const Tensor& target) { return eager_step(input, target); })));
    }
  }
  SgdTrainingStep(const SgdTrainingStep&) = delete;
  SgdTrainingStep& operator=(const SgdTrainingStep&) = delete;

  /// One step; returns its loss.
  Tensor operator()() { return compiled_ ? (*compiled_)(x_, y_) : eager_step(x_, y_); }

  /// The compiled step (only when made with `compiled`).
  const Compiled<std::function<Tensor(const Tensor&, const Tensor&)>>& compiled() const { return *compiled_; }

 private:
  Tensor eager_step(const Tensor& input, const Tensor& target) {
    sgd_.zero_grad();
    Tensor loss;
    {
      amp::autocast region(DeviceType::CPU, mixed_precision_);
      loss = nn::functional::cross_entropy(model_.forward(input), target);
    }
    scaler_.scale(loss).backward();
    scaler_.step(sgd_);
    scaler_.update();
    return loss;
  }

  nn::Module& model_;
  Tensor x_, y_;
  bool mixed_precision_;
  optim::SGD sgd_;
  amp::GradScaler scaler_;
  std::optional<Compiled<std::function<Tensor(const Tensor&, const Tensor&)>>> compiled_;
};

}  // namespace kiln::bench
