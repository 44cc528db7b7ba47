// optim/adam.cpp — Adam and AdamW (see optim/adam.h for the rule).
#include "optim/adam.h"

#include <cmath>

#include "core/creation.h"
#include "core/ops/optim.h"

namespace kiln::optim {

Adam::Adam(TensorList params, const AdamOptions& options) : Adam(std::move(params), options, false) {}

Adam::Adam(TensorList params, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(params), o), decoupled_weight_decay_(decoupled) {
  KILN_CHECK_VALUE(o.lr >= 0, "Invalid learning rate: ", o.lr);
  KILN_CHECK_VALUE(o.eps_ >= 0, "Invalid epsilon value: ", o.eps_);
  KILN_CHECK_VALUE(o.betas_.first >= 0 && o.betas_.first < 1, "Invalid beta parameter at index 0: ", o.betas_.first);
  KILN_CHECK_VALUE(o.betas_.second >= 0 && o.betas_.second < 1, "Invalid beta parameter at index 1: ", o.betas_.second);
  KILN_CHECK_VALUE(o.weight_decay_ >= 0, "Invalid weight_decay value: ", o.weight_decay_);
}

void Adam::update(Tensor& p, const Tensor& grad, ParamState& state, const OptimizerOptions& options) {
  const auto& o = static_cast<const AdamOptions&>(options);
  const auto [beta1, beta2] = o.betas_;
  if (state.buffers.empty()) {
    state.buffers["exp_avg"] = zeros_like(p);
    state.buffers["exp_avg_sq"] = zeros_like(p);
    if (o.amsgrad_) state.buffers["max_exp_avg_sq"] = zeros_like(p);
  }
  Tensor& m = state.buffers["exp_avg"];
  Tensor& v = state.buffers["exp_avg_sq"];
  const double t = static_cast<double>(state.step);
  const double bias1 = 1 - std::pow(beta1, t);
  const double bias2 = 1 - std::pow(beta2, t);
  if (ops::can_fuse_adam(p, grad, m, v)) {
    // The same rule in one pass (core/cpu/adam.cpp); the lines below are its reference.
    AdamStep s{o.lr, beta1, beta2, o.eps_, o.weight_decay_, bias1, bias2, decoupled_weight_decay_, o.amsgrad_, o.maximize_};
    ops::adam_step_(p, grad, m, v, o.amsgrad_ ? state.buffers["max_exp_avg_sq"] : Tensor(), s);
    return;
  }
  Tensor g = o.maximize_ ? -grad : grad;
  if (o.weight_decay_ != 0) {
    if (decoupled_weight_decay_) p.mul_(1 - o.lr * o.weight_decay_);
    else g = g + p * o.weight_decay_;
  }
  m.mul_(beta1).add_(g, 1 - beta1);
  v.mul_(beta2).add_(g * g, 1 - beta2);
  Tensor second = v;
  if (o.amsgrad_) {
    Tensor& vmax = state.buffers["max_exp_avg_sq"];
    vmax.copy_(vmax.maximum(v));
    second = vmax;
  }
  // denom = sqrt(v) / sqrt(bias2) + eps, step = lr / bias1: PyTorch's arrangement of the rule.
  const Tensor denom = second.sqrt() / std::sqrt(bias2) + o.eps_;
  p.sub_(m / denom, o.lr / bias1);
}

}  // namespace kiln::optim
