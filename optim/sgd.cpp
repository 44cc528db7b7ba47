// optim/sgd.cpp — SGD's update (see optim/sgd.h for the rule).
#include "optim/sgd.h"

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
