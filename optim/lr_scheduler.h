// optim/lr_scheduler.h — learning-rate schedules, with PyTorch's semantics: a scheduler sets
// each group's lr from its initial lr and the epoch counter, and step() advances the counter
// (call it after optimizer.step()). Closed forms are used where PyTorch has them.
//
//   kiln::optim::CosineAnnealingLR sched(opt, /*t_max=*/10);
//   for (int epoch = 0; epoch < 10; ++epoch) { train(); sched.step(); }
//
// Read next: optim/clip_grad.h.
#pragma once

#include <limits>
#include <vector>

#include "optim/optimizer.h"

namespace kiln::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  /// Advances one epoch (or one batch, for OneCycleLR) and sets the new lrs.
  void step();
  /// The lrs the last step set, one per parameter group.
  std::vector<double> get_last_lr() const;
  std::int64_t last_epoch() const { return last_epoch_; }

  /// "last_epoch", "base_lrs" and "_last_lr", PyTorch's names. Every schedule here is a closed
  /// form of (base_lrs, last_epoch), so these are all a resumed schedule needs; the
  /// optimizer's own state_dict carries the lrs themselves.
  StateDict state_dict() const;
  /// Restores a state_dict() from a scheduler over as many parameter groups.
  void load_state_dict(const StateDict& dict);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  /// Called at the end of the derived constructor: PyTorch's initial step (epoch 0).
  void initialize() { step(); }
  /// The lr of group `g` at epoch `epoch`.
  virtual double lr_at(std::size_t g, std::int64_t epoch) const = 0;

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::int64_t last_epoch_ = -1;
};

/// lr = base * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, std::int64_t step_size, double gamma = 0.1);
 protected:
  double lr_at(std::size_t g, std::int64_t epoch) const override;
 private:
  std::int64_t step_size_;
  double gamma_;
};

/// lr = base * gamma^(number of milestones <= epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<std::int64_t> milestones, double gamma = 0.1);
 protected:
  double lr_at(std::size_t g, std::int64_t epoch) const override;
 private:
  std::vector<std::int64_t> milestones_;
  double gamma_;
};

/// lr = base * gamma^epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);
 protected:
  double lr_at(std::size_t g, std::int64_t epoch) const override;
 private:
  double gamma_;
};

/// lr = eta_min + (base - eta_min) (1 + cos(pi epoch / t_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0.0);
 protected:
  double lr_at(std::size_t g, std::int64_t epoch) const override;
 private:
  std::int64_t t_max_;
  double eta_min_;
};

/// Warm-up: lr = base * (start + (end - start) min(epoch, total_iters) / total_iters)
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           std::int64_t total_iters = 5);
 protected:
  double lr_at(std::size_t g, std::int64_t epoch) const override;
 private:
  double start_, end_;
  std::int64_t total_;
};

struct OneCycleLROptions {
  double pct_start = 0.3;
  bool cos_anneal = true;  // false: linear
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
};

/// The 1cycle policy, stepped once per batch: lr rises from max_lr/div_factor to max_lr over
/// pct_start of the steps, then anneals to initial/final_div_factor; momentum (SGD's momentum
/// or Adam's beta1) moves the opposite way.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, std::int64_t total_steps, OneCycleLROptions options = {});
 protected:
  double lr_at(std::size_t g, std::int64_t epoch) const override;
 private:
  struct Phase {
    double end_step, start_lr_factor, end_lr_factor, start_momentum, end_momentum;
  };
  double anneal(double start, double end, double pct) const;
  void set_momentum(std::int64_t step) const;
  std::int64_t total_steps_;
  OneCycleLROptions options_;
  double max_lr_;
  std::vector<Phase> phases_;
};

struct ReduceLROnPlateauOptions {
  enum class Mode { Min, Max };
  Mode mode = Mode::Min;
  double factor = 0.1;
  std::int64_t patience = 10;
  double threshold = 1e-4;
  bool relative_threshold = true;  // PyTorch's threshold_mode 'rel' (false: 'abs')
  std::int64_t cooldown = 0;
  double min_lr = 0.0;
  double eps = 1e-8;
};

/// Multiplies the lr by `factor` when a metric stops improving for `patience` epochs.
class ReduceLROnPlateau {
 public:
  using Options = ReduceLROnPlateauOptions;
  using Mode = ReduceLROnPlateauOptions::Mode;
  explicit ReduceLROnPlateau(Optimizer& optimizer, Options options = {});
  void step(double metric);
  std::vector<double> get_last_lr() const;
  std::int64_t num_bad_epochs() const { return num_bad_epochs_; }

  /// "best", "num_bad_epochs", "cooldown_counter" and "last_epoch", PyTorch's names.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 private:
  bool is_better(double a) const;
  Optimizer& optimizer_;
  Options options_;
  double best_;
  std::int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0, last_epoch_ = 0;
};

}  // namespace kiln::optim
