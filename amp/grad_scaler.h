// amp/grad_scaler.h — loss scaling for Float16 training (PyTorch's torch.amp.GradScaler).
//
// Float16 cannot hold gradients below about 6e-8: small ones flush to zero. The scaler
// multiplies the loss by a large factor S before backward, so every gradient is S times
// larger on its way down, then divides the parameters' gradients by S before the step. When
// S was too large some gradient overflowed to inf: that step is skipped and S halved; after
// `growth_interval` clean steps S doubles again.
//
//   amp::GradScaler scaler;
//   scaler.scale(loss).backward();
//   scaler.unscale_(optimizer);                       // optional: to clip true gradients
//   optim::clip_grad_norm_(model.parameters(), 1.0);
//   scaler.step(optimizer);                           // skipped when a grad is inf/NaN
//   scaler.update();
//
// Read next: core/cpu/unscale.cpp (the one-pass unscale and inf check), examples/amp_train.cpp.
#pragma once

#include <map>
#include <utility>
#include <vector>
#include <optional>

#include "core/state_dict.h"
#include "core/tensor.h"
#include "optim/optimizer.h"

namespace kiln::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// loss * scale (the scale lives on the loss's device). Disabled: the loss itself.
  Tensor scale(const Tensor& outputs);
  /// Divides the optimizer's gradients by the scale in place and records whether any was
  /// inf/NaN: one pass per gradient. At most once per optimizer between update() calls.
  void unscale_(optim::Optimizer& optimizer);
  /// unscale_ (unless already done), then optimizer.step() unless a gradient was inf/NaN.
  /// Returns whether the step ran.
  bool step(optim::Optimizer& optimizer);
  /// Backs off the scale after a skipped step, or grows it after growth_interval clean ones;
  /// with `new_scale`, sets it instead.
  void update(std::optional<double> new_scale = std::nullopt);

  /// The current scale (1.0 when disabled).
  double get_scale() const;
  bool is_enabled() const { return options_.enabled; }
  std::int64_t growth_tracker() const { return growth_tracker_; }
  const GradScalerOptions& options() const { return options_; }

  /// scale, growth_factor, backoff_factor, growth_interval and _growth_tracker (PyTorch's
  /// keys), as 0-d tensors.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& dict);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    bool found_inf = false;
  };
  PerOptimizer& per_optimizer(const optim::Optimizer& optimizer) { return optimizers_[&optimizer]; }

  /// The scale as a one-element Float32 tensor on `device`, as PyTorch keeps it: scale() reads
  /// it from memory, so a captured step that replays scale() multiplies by the current scale,
  /// not by the one it was captured with.
  const Tensor& scale_tensor(Device device);
  /// unscale_'s inf/NaN flag for `device`, zeroed; kept, so a step allocates none.
  const Tensor& found_inf_flag(Device device);

  GradScalerOptions options_;
  double scale_;
  std::int64_t growth_tracker_ = 0;
  std::vector<std::pair<Device, Tensor>> scale_tensors_;  // scale_, on each device it was asked for
  std::vector<std::pair<Device, Tensor>> found_inf_flags_;
  std::map<const optim::Optimizer*, PerOptimizer> optimizers_;
};

}  // namespace kiln::amp
