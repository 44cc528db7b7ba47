// optim/sgd.h — stochastic gradient descent with PyTorch's update rule:
//   g = grad (negated when maximize) + weight_decay * p
//   buf = g on the first step, then momentum * buf + (1 - dampening) * g
//   g = g + momentum * buf with nesterov, else g = buf          (when momentum != 0)
//   p = p - lr * g
// Read next: optim/adam.h.
#pragma once

#include "optim/optimizer.h"

namespace kiln::optim {

struct SGDOptions : OptimizerOptions {
  explicit SGDOptions(double lr) : OptimizerOptions(lr) {}
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<SGDOptions>(*this); }
  void visit_hyperparameters(HyperparameterVisitor& visit) override {
    OptimizerOptions::visit_hyperparameters(visit);
    visit("momentum", momentum_);
    visit("dampening", dampening_);
    visit("weight_decay", weight_decay_);
    visit("nesterov", nesterov_);
    visit("maximize", maximize_);
  }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  SGDOptions& maximize(bool v) { maximize_ = v; return *this; }
  double momentum_ = 0.0, dampening_ = 0.0, weight_decay_ = 0.0;
  bool nesterov_ = false, maximize_ = false;
};

class SGD : public Optimizer {
 public:
  SGD(TensorList params, const SGDOptions& options);

 protected:
  void update(Tensor& p, const Tensor& grad, ParamState& state, const OptimizerOptions& options) override;
};

}  // namespace kiln::optim
