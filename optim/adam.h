// optim/adam.h — Adam and AdamW with PyTorch's update rules:
//   g = grad (negated when maximize); Adam: g += weight_decay * p; AdamW: p *= 1 - lr * weight_decay
//   m = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
//   v_max = max(v_max, v) with amsgrad (used in place of v below)
//   p -= lr / (1 - beta1^t) * m / (sqrt(v / (1 - beta2^t)) + eps)
// Read next: optim/rmsprop.h.
#pragma once

#include <utility>

#include "optim/optimizer.h"

namespace kiln::optim {

struct AdamOptions : OptimizerOptions {
  explicit AdamOptions(double lr = 1e-3) : OptimizerOptions(lr) {}
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamOptions>(*this); }
  void visit_hyperparameters(HyperparameterVisitor& visit) override {
    OptimizerOptions::visit_hyperparameters(visit);
    visit("betas", betas_);
    visit("eps", eps_);
    visit("weight_decay", weight_decay_);
    visit("amsgrad", amsgrad_);
    visit("maximize", maximize_);
  }
  AdamOptions& betas(std::pair<double, double> b) { betas_ = b; return *this; }
  AdamOptions& eps(double v) { eps_ = v; return *this; }
  AdamOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  AdamOptions& amsgrad(bool v) { amsgrad_ = v; return *this; }
  AdamOptions& maximize(bool v) { maximize_ = v; return *this; }
  std::pair<double, double> betas_{0.9, 0.999};
  double eps_ = 1e-8, weight_decay_ = 0.0;
  bool amsgrad_ = false, maximize_ = false;
};

class Adam : public Optimizer {
 public:
  Adam(TensorList params, const AdamOptions& options);

 protected:
  Adam(TensorList params, const AdamOptions& options, bool decoupled);
  void update(Tensor& p, const Tensor& grad, ParamState& state, const OptimizerOptions& options) override;

 private:
  bool decoupled_weight_decay_;
};

/// Adam with decoupled weight decay (default 0.01): the decay shrinks the parameter directly
/// instead of entering the gradient (and so the moment estimates).
struct AdamWOptions : AdamOptions {
  explicit AdamWOptions(double lr = 1e-3) : AdamOptions(lr) { weight_decay_ = 1e-2; }
  std::unique_ptr<OptimizerOptions> clone() const override { return std::make_unique<AdamWOptions>(*this); }
  // The setters again, returning AdamWOptions&, so that AdamW(params, AdamWOptions(lr).weight_decay(0.05))
  // compiles: AdamOptions' own would return AdamOptions&.
  AdamWOptions& betas(std::pair<double, double> b) { AdamOptions::betas(b); return *this; }
  AdamWOptions& eps(double v) { AdamOptions::eps(v); return *this; }
  AdamWOptions& weight_decay(double v) { AdamOptions::weight_decay(v); return *this; }
  AdamWOptions& amsgrad(bool v) { AdamOptions::amsgrad(v); return *this; }
  AdamWOptions& maximize(bool v) { AdamOptions::maximize(v); return *this; }
};

class AdamW : public Adam {
 public:
  AdamW(TensorList params, const AdamWOptions& options) : Adam(std::move(params), options, true) {}
};

}  // namespace kiln::optim
