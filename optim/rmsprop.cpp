// optim/rmsprop.cpp — RMSprop (see optim/rmsprop.h for the rule).
#include "optim/rmsprop.h"

#include "core/creation.h"

namespace kiln::optim {

RMSprop::RMSprop(TensorList params, const RMSpropOptions& o) : Optimizer(std::move(params), o) {
  KILN_CHECK_VALUE(o.lr >= 0, "Invalid learning rate: ", o.lr);
  KILN_CHECK_VALUE(o.eps_ >= 0, "Invalid epsilon value: ", o.eps_);
  KILN_CHECK_VALUE(o.alpha_ >= 0, "Invalid alpha value: ", o.alpha_);
  KILN_CHECK_VALUE(o.momentum_ >= 0, "Invalid momentum value: ", o.momentum_);
}

void RMSprop::update(Tensor& p, const Tensor& grad, ParamState& state, const OptimizerOptions& options) {
  const auto& o = static_cast<const RMSpropOptions&>(options);
  Tensor g = o.maximize_ ? -grad : grad;
  if (o.weight_decay_ != 0) g = g + p * o.weight_decay_;
  if (state.buffers.empty()) {
    state.buffers["square_avg"] = zeros_like(p);
    if (o.momentum_ > 0) state.buffers["momentum_buffer"] = zeros_like(p);
    if (o.centered_) state.buffers["grad_avg"] = zeros_like(p);
  }
  Tensor& sq = state.buffers["square_avg"];
  sq.mul_(o.alpha_).add_(g * g, 1 - o.alpha_);
  Tensor avg;
  if (o.centered_) {
    Tensor& ga = state.buffers["grad_avg"];
    ga.mul_(o.alpha_).add_(g, 1 - o.alpha_);
    avg = (sq - ga * ga).sqrt() + o.eps_;
  } else {
    avg = sq.sqrt() + o.eps_;
  }
  if (o.momentum_ > 0) {
    Tensor& buf = state.buffers["momentum_buffer"];
    buf.mul_(o.momentum_).add_(g / avg);
    p.sub_(buf, o.lr);
  } else {
    p.sub_(g / avg, o.lr);
  }
}

}  // namespace kiln::optim
