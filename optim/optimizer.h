// optim/optimizer.h — the Optimizer base: parameter groups with their own options (lr,
// weight_decay, ...), zero_grad, step, and state_dict. Updates run inside NoGradGuard, which
// is exactly what makes an in-place update of a leaf that requires grad legal (Note [In-place
// ops and the creation contract]).
//
//   kiln::optim::SGD opt(model.parameters(), kiln::optim::SGDOptions(0.1).momentum(0.9));
//   opt.zero_grad(); loss.backward(); opt.step();
//
// Parameters moved by Module::to() after the optimizer was built are followed through their
// forwarding record, with their state moved along (Note [Moving parameters]).
// Read next: optim/sgd.h, optim/adam.h.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/state_dict.h"
#include "core/tensor.h"

namespace kiln::optim {

/// Sees each hyperparameter of an options struct by PyTorch's name (lr, momentum, betas,
/// ...), once to save a parameter group and once to load it, so every struct lists its fields
/// in one place.
class HyperparameterVisitor {
 public:
  virtual ~HyperparameterVisitor() = default;
  virtual void operator()(const std::string& name, double& value) = 0;
  virtual void operator()(const std::string& name, bool& value) = 0;
  virtual void operator()(const std::string& name, std::pair<double, double>& value) = 0;
};

/// Options every optimizer has; each optimizer extends it.
struct OptimizerOptions {
  explicit OptimizerOptions(double lr) : lr(lr) {}
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  /// Calls `visit` on every hyperparameter, this struct's after its base's.
  virtual void visit_hyperparameters(HyperparameterVisitor& visit) { visit("lr", lr); }
  double lr;
};

struct ParamGroup {
  TensorList params;
  std::unique_ptr<OptimizerOptions> options;
};

/// Per-parameter state: a step count and named buffers (momentum_buffer, exp_avg, ...).
struct ParamState {
  std::int64_t step = 0;
  std::map<std::string, Tensor> buffers;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient.
  void step();
  /// Sets gradients to none (default, PyTorch >= 2.0) or to zero.
  void zero_grad(bool set_to_none = true);
  void add_param_group(TensorList params, const OptimizerOptions& options);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// The state of parameter `index` of group `group`.
  const ParamState& state(std::size_t group, std::size_t index) const;

  /// PyTorch's layout, flattened into names: "state.<i>.step" and "state.<i>.<buffer>"
  /// (exp_avg, momentum_buffer, ...) for parameter i counted across all groups, and
  /// "param_groups.<g>.<hyperparameter>" (lr, betas, ...) plus "param_groups.<g>.params" (the
  /// indices of the group's parameters), so a learning rate set by a scheduler survives.
  StateDict state_dict() const;
  /// Replaces all state and hyperparameters with `dict`'s. A dict that does not fit (another
  /// number or size of groups, another optimizer's hyperparameters, a buffer of another
  /// shape, a missing or unexpected key) is an error that names the difference, and leaves
  /// this optimizer unchanged.
  void load_state_dict(const StateDict& dict);

 protected:
  Optimizer(TensorList params, const OptimizerOptions& defaults);
  /// Updates one parameter in place; `grad` is its gradient, already checked defined.
  virtual void update(Tensor& param, const Tensor& grad, ParamState& state, const OptimizerOptions& options) = 0;

 private:
  /// Follows forwarding records left by Module::to(), moving state along.
  void follow_moved_parameters();

  std::vector<ParamGroup> groups_;
  std::vector<std::vector<ParamState>> state_;
};

}  // namespace kiln::optim
