// amp/grad_scaler.cpp — GradScaler's bookkeeping: per-optimizer stages, the one-pass unscale
// per device, and the scale's growth and back-off (PyTorch's _amp_update_scale_).
#include "amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/capture_hooks.h"
#include "core/creation.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "core/ops/optim.h"

namespace kiln::amp {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(options.init_scale) {
  KILN_CHECK_VALUE(options.growth_factor > 1.0, "The growth factor must be > 1.0.  Got ", options.growth_factor);
  KILN_CHECK_VALUE(options.backoff_factor < 1.0 && options.backoff_factor > 0.0,
                   "The backoff factor must be < 1.0.  Got ", options.backoff_factor);
  KILN_CHECK_VALUE(options.growth_interval > 0, "growth_interval must be a positive integer, got ",
                   options.growth_interval);
}

const Tensor& GradScaler::scale_tensor(Device device) {
  auto it = std::find_if(scale_tensors_.begin(), scale_tensors_.end(),
                         [&](const auto& entry) { return entry.first == device; });
  if (it == scale_tensors_.end()) {
    scale_tensors_.emplace_back(device, empty({}, TensorOptions().dtype(kFloat32).device(device)));
    it = std::prev(scale_tensors_.end());
  }
  Tensor& t = it->second;
  NoGradGuard no_grad;
  t.fill_(scale_);  // one element: cheaper than tracking whether scale_ changed
  return t;
}

const Tensor& GradScaler::found_inf_flag(Device device) {
  auto it = std::find_if(found_inf_flags_.begin(), found_inf_flags_.end(),
                         [&](const auto& entry) { return entry.first == device; });
  if (it == found_inf_flags_.end()) {
    found_inf_flags_.emplace_back(device, empty({1}, TensorOptions().dtype(kFloat32).device(device)));
    it = std::prev(found_inf_flags_.end());
  }
  it->second.zero_();
  return it->second;
}

Tensor GradScaler::scale(const Tensor& outputs) {
  if (!options_.enabled) return outputs;
  // The fill of the scale tensor is a region of its own: a captured step refills it from
  // scale_ at each replay, and its kernels read it from memory (Note [Capturing a step]).
  const Tensor* current = nullptr;
  {
    capture::Region region("GradScaler.scale", [this, device = outputs.device()] { scale_tensor(device); });
    current = &scale_tensor(outputs.device());
  }
  return outputs * *current;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  // Reads found_inf on the host and multiplies by 1/scale_: replayed as it is.
  capture::Region region("GradScaler.unscale_", [this, &optimizer] { unscale_(optimizer); });
  PerOptimizer& state = per_optimizer(optimizer);
  KILN_CHECK(state.stage != Stage::Unscaled,
             "unscale_() has already been called on this optimizer since the last update().");
  KILN_CHECK(state.stage != Stage::Stepped, "unscale_() is being called after step().");

  // One pass per gradient, grouped by device so each device gets one found_inf flag and the
  // host reads each flag once (one synchronisation per device, not per gradient).
  std::vector<std::pair<Device, TensorList>> grads_by_device;
  for (const optim::ParamGroup& group : optimizer.param_groups()) {
    for (const Tensor& p : group.params) {
      const Tensor& g = p.grad();
      if (!g.defined()) continue;
      KILN_CHECK_VALUE(g.dtype() != kFloat16, "Attempting to unscale FP16 gradients.");
      auto it = std::find_if(grads_by_device.begin(), grads_by_device.end(),
                             [&](const auto& entry) { return entry.first == g.device(); });
      if (it == grads_by_device.end()) it = grads_by_device.insert(it, {g.device(), {}});
      it->second.push_back(g);
    }
  }
  NoGradGuard no_grad;
  const double inv_scale = 1.0 / scale_;
  bool found_inf = false;
  for (const auto& [device, grads] : grads_by_device) {
    const Tensor& flag = found_inf_flag(device);
    ops::unscale_and_check_(grads, inv_scale, flag);
    found_inf = found_inf || flag.item<float>() != 0.0f;
  }
  state.found_inf = found_inf;
  state.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  // Decides on the host whether the optimizer steps: replayed as it is.
  capture::Region region("GradScaler.step", [this, &optimizer] { step(optimizer); });
  PerOptimizer& state = per_optimizer(optimizer);
  KILN_CHECK(state.stage != Stage::Stepped, "step() has already been called since the last update().");
  if (state.stage == Stage::Ready) unscale_(optimizer);
  const bool run = !state.found_inf;
  if (run) optimizer.step();
  state.stage = Stage::Stepped;
  return run;
}

void GradScaler::update(std::optional<double> new_scale) {
  if (!options_.enabled) return;
  capture::Region region("GradScaler.update", [this, new_scale] { update(new_scale); });
  if (new_scale) {
    scale_ = *new_scale;
  } else {
    KILN_CHECK(!optimizers_.empty(), "No inf checks were recorded prior to update.");
    bool found_inf = false;
    for (const auto& [optimizer, state] : optimizers_) found_inf = found_inf || state.found_inf;
    if (found_inf) {
      scale_ *= options_.backoff_factor;
      growth_tracker_ = 0;
    } else if (++growth_tracker_ == options_.growth_interval) {
      // Growing past Float32's range would turn every later loss into inf.
      const double grown = scale_ * options_.growth_factor;
      if (std::isfinite(static_cast<float>(grown))) scale_ = grown;
      growth_tracker_ = 0;
    }
  }
  optimizers_.clear();
}

double GradScaler::get_scale() const { return options_.enabled ? scale_ : 1.0; }

StateDict GradScaler::state_dict() const {
  if (!options_.enabled) return {};
  return {{"scale", tensor(scale_, dtype(kFloat64))},
          {"growth_factor", tensor(options_.growth_factor, dtype(kFloat64))},
          {"backoff_factor", tensor(options_.backoff_factor, dtype(kFloat64))},
          {"growth_interval", tensor(options_.growth_interval)},
          {"_growth_tracker", tensor(growth_tracker_)}};
}

void GradScaler::load_state_dict(const StateDict& dict) {
  if (!options_.enabled) return;
  KILN_CHECK(!dict.empty(), "The source state dict is empty, possibly because it was saved from a "
             "disabled instance of GradScaler.");
  scale_ = dict.at("scale").item<double>();
  options_.growth_factor = dict.at("growth_factor").item<double>();
  options_.backoff_factor = dict.at("backoff_factor").item<double>();
  options_.growth_interval = dict.at("growth_interval").item<std::int64_t>();
  growth_tracker_ = dict.at("_growth_tracker").item<std::int64_t>();
}

}  // namespace kiln::amp
