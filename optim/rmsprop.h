// optim/rmsprop.h — RMSprop with PyTorch's update rule:
//   g = grad (negated when maximize) + weight_decay * p
//   sq = alpha sq + (1 - alpha) g^2
//   avg = sqrt(sq - ga^2) + eps with centered (ga = alpha ga + (1 - alpha) g), else sqrt(sq) + eps
//   with momentum: buf = momentum buf + g / avg, p -= lr buf;  else p -= lr g / avg
// Read next: optim/lr_scheduler.h.
#pragma once

#include "optim/optimizer.h"

namespace kiln::optim {

struct RMSpropOptions : OptimizerOptions {
  explicit RMSpropOptions(double lr = 1e-2) : OptimizerOptions(lr) {}
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<RMSpropOptions>(*this); }
  void visit_hyperparameters(HyperparameterVisitor& visit) override {
    OptimizerOptions::visit_hyperparameters(visit);
    visit("alpha", alpha_);
    visit("eps", eps_);
    visit("weight_decay", weight_decay_);
    visit("momentum", momentum_);
    visit("centered", centered_);
    visit("maximize", maximize_);
  }
  RMSpropOptions& alpha(double v) { alpha_ = v; return *this; }
  RMSpropOptions& eps(double v) { eps_ = v; return *this; }
  RMSpropOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  RMSpropOptions& momentum(double v) { momentum_ = v; return *this; }
  RMSpropOptions& centered(bool v) { centered_ = v; return *this; }
  RMSpropOptions& maximize(bool v) { maximize_ = v; return *this; }
  double alpha_ = 0.99, eps_ = 1e-8, weight_decay_ = 0.0, momentum_ = 0.0;
  bool centered_ = false, maximize_ = false;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(TensorList params, const RMSpropOptions& options);

 protected:
  void update(Tensor& p, const Tensor& grad, ParamState& state, const OptimizerOptions& options) override;
};

}  // namespace kiln::optim
