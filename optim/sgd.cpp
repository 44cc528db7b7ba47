// optim/sgd.cpp — SGD's update (see optim/sgd.h for the rule).
#include "optim/sgd.h"

#include "core/creation.h"
#include "core/ops/optim.h"

namespace kiln::optim {

SGD::SGD(TensorList params, const SGDOptions& o) : Optimizer(std::move(params), o) {
  KILN_CHECK_VALUE(o.lr >= 0, "Invalid learning rate: ", o.lr);
  KILN_CHECK_VALUE(o.momentum_ >= 0, "Invalid momentum value: ", o.momentum_);
  KILN_CHECK_VALUE(o.weight_decay_ >= 0, "Invalid weight_decay value: ", o.weight_decay_);
  KILN_CHECK_VALUE(!o.nesterov_ || (o.momentum_ > 0 && o.dampening_ == 0),
                   "Nesterov momentum requires a momentum and zero dampening");
}

void SGD::update(Tensor& p, const Tensor& grad, ParamState& state, const OptimizerOptions& options) {
  const auto& o = static_cast<const SGDOptions&>(options);
  const bool has_buffer = state.buffers.contains("momentum_buffer");
  Tensor buffer = o.momentum_ != 0 && has_buffer ? state.buffers["momentum_buffer"] : Tensor();
  if (ops::can_fuse_sgd(p, grad, buffer)) {
    // The same rule in one pass (core/cpu/sgd.cpp); the lines below are its reference.
    const bool first = o.momentum_ != 0 && !has_buffer;
    if (first) buffer = state.buffers.emplace("momentum_buffer", empty_like(p)).first->second;
    ops::sgd_step_(p, grad, buffer,
                   SgdStep{o.lr, o.momentum_, o.dampening_, o.weight_decay_, o.nesterov_, o.maximize_, first});
    return;
  }
  Tensor g = o.maximize_ ? -grad : grad;
  if (o.weight_decay_ != 0) g = g + p * o.weight_decay_;
  if (o.momentum_ != 0) {
    auto it = state.buffers.find("momentum_buffer");
    if (it == state.buffers.end()) {
      it = state.buffers.emplace("momentum_buffer", g.clone()).first;
    } else {
      it->second.mul_(o.momentum_).add_(g, 1 - o.dampening_);
    }
    const Tensor& buf = it->second;
    g = o.nesterov_ ? g + buf * o.momentum_ : buf;
  }
  p.add_(g, -o.lr);
}

}  // namespace kiln::optim
