// optim/optimizer.cpp — the Optimizer base.
#include "optim/optimizer.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>

#include "core/capture_hooks.h"
#include "core/creation.h"
#include "core/grad_mode.h"
#include "nn/module.h"

namespace kiln::optim {

Optimizer::Optimizer(TensorList params, const OptimizerOptions& defaults) {
  add_param_group(std::move(params), defaults);
}

void Optimizer::add_param_group(TensorList params, const OptimizerOptions& options) {
  KILN_CHECK(!params.empty(), "optimizer got an empty parameter list");
  std::set<const TensorImpl*> seen;
  for (const auto& g : groups_) {
    for (const Tensor& p : g.params) seen.insert(p.impl());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    KILN_CHECK(p.defined(), "optimizer parameter ", i, " is an undefined tensor");
    KILN_CHECK(p.is_leaf(), "can't optimize a non-leaf Tensor (parameter ", i, " is the output of ",
               node_name(*p.grad_fn()), ")\n", msg::blame("parameter", p));
    KILN_CHECK(p.is_floating_point(), "optimizer parameter ", i, " must be floating point, got ", p.dtype());
    KILN_CHECK_VALUE(seen.insert(p.impl()).second, "some parameters appear in more than one parameter group");
  }
  state_.emplace_back(params.size());
  groups_.push_back({std::move(params), options.clone()});
}

const ParamState& Optimizer::state(std::size_t group, std::size_t index) const {
  KILN_CHECK_INDEX(group < state_.size() && index < state_[group].size(), "no optimizer state for group ",
                   group, ", parameter ", index);
  return state_[group][index];
}

void Optimizer::follow_moved_parameters() {
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = 0; i < groups_[g].params.size(); ++i) {
      Tensor& p = groups_[g].params[i];
      Tensor now = nn::current(p);
      if (now.is_same(p)) continue;
      for (auto& [name, buffer] : state_[g][i].buffers) buffer = buffer.to(now.device(), now.dtype());
      p = now;
    }
  }
}

void Optimizer::step() {
  // Its kernels take host numbers that change every step (the step count, a scheduled lr): a
  // captured step calls step() itself at each replay (Note [Capturing a step]).
  capture::Region region("optimizer.step", [this] { step(); });
  NoGradGuard no_grad;
  follow_moved_parameters();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    for (std::size_t i = 0; i < group.params.size(); ++i) {
      Tensor& p = group.params[i];
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      ParamState& s = state_[g][i];
      ++s.step;
      update(p, grad, s, *group.options);
    }
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  capture::Region region("optimizer.zero_grad", [this, set_to_none] { zero_grad(set_to_none); });
  NoGradGuard no_grad;
  follow_moved_parameters();
  for (auto& group : groups_) {
    for (Tensor& p : group.params) {
      if (set_to_none) capture::grad_unbound(p);
      Tensor& g = p.mutable_grad();
      if (!g.defined()) continue;
      if (set_to_none) g = Tensor();
      else g.zero_();
    }
  }
}

namespace {

/// Writes each hyperparameter as a Float64 (or Bool) tensor under `prefix`.
class HyperparameterWriter : public HyperparameterVisitor {
 public:
  HyperparameterWriter(StateDict& dict, std::string prefix) : dict_(dict), prefix_(std::move(prefix)) {}
  void operator()(const std::string& name, double& value) override { dict_.insert(prefix_ + name, tensor(value, kFloat64)); }
  void operator()(const std::string& name, bool& value) override { dict_.insert(prefix_ + name, tensor(value)); }
  void operator()(const std::string& name, std::pair<double, double>& value) override {
    dict_.insert(prefix_ + name, tensor({value.first, value.second}, kFloat64));
  }

 private:
  StateDict& dict_;
  std::string prefix_;
};

/// Reads each hyperparameter back from `prefix`, checking its shape; names what it read.
class HyperparameterReader : public HyperparameterVisitor {
 public:
  HyperparameterReader(const StateDict& dict, std::string prefix) : dict_(dict), prefix_(std::move(prefix)) {}
  void operator()(const std::string& name, double& value) override { value = scalar(name).item<double>(); }
  void operator()(const std::string& name, bool& value) override { value = scalar(name).item<double>() != 0.0; }
  void operator()(const std::string& name, std::pair<double, double>& value) override {
    const Tensor& t = find(name);
    KILN_CHECK_VALUE(t.numel() == 2, "loaded state dict's '", prefix_, name, "' holds ", t.numel(),
                     " values; expected 2");
    const Tensor v = t.to(kCPU, kFloat64).flatten();
    value = {v[0].item<double>(), v[1].item<double>()};
  }
  std::set<std::string> names;

 private:
  const Tensor& find(const std::string& name) {
    names.insert(name);
    const Tensor* t = dict_.find(prefix_ + name);
    KILN_CHECK_VALUE(t != nullptr, "loaded state dict is missing '", prefix_, name, "'");
    return *t;
  }
  const Tensor& scalar(const std::string& name) {
    const Tensor& t = find(name);
    KILN_CHECK_VALUE(t.numel() == 1, "loaded state dict's '", prefix_, name, "' holds ", t.numel(),
                     " values; expected 1");
    return t;
  }
  const StateDict& dict_;
  std::string prefix_;
};

/// The names a group's options visit, in order.
std::vector<std::string> hyperparameter_names(OptimizerOptions& options) {
  struct Names : HyperparameterVisitor {
    std::vector<std::string> names;
    void operator()(const std::string& n, double&) override { names.push_back(n); }
    void operator()(const std::string& n, bool&) override { names.push_back(n); }
    void operator()(const std::string& n, std::pair<double, double>&) override { names.push_back(n); }
  } names;
  options.visit_hyperparameters(names);
  return names.names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return "{" + out + "}";
}

/// "<rest>" of "<prefix><rest>", or nullopt.
std::optional<std::string> after(const std::string& key, const std::string& prefix) {
  if (key.rfind(prefix, 0) != 0) return std::nullopt;
  return key.substr(prefix.size());
}

}  // namespace

StateDict Optimizer::state_dict() const {
  StateDict dict;
  std::size_t index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (std::size_t i = 0; i < state_[g].size(); ++i, ++index) {
      const ParamState& s = state_[g][i];
      if (s.step == 0) continue;
      const std::string prefix = detail::str_cat("state.", index, ".");
      // PyTorch keeps the step as a Float32 scalar tensor.
      dict.insert(prefix + "step", tensor(static_cast<float>(s.step)));
      for (const auto& [name, buffer] : s.buffers) dict.insert(prefix + name, buffer.detach());
    }
  }
  index = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = detail::str_cat("param_groups.", g, ".");
    HyperparameterWriter writer(dict, prefix);
    std::unique_ptr<OptimizerOptions> options = groups_[g].options->clone();
    options->visit_hyperparameters(writer);
    std::vector<std::int64_t> params(groups_[g].params.size());
    for (std::int64_t& p : params) p = static_cast<std::int64_t>(index++);
    dict.insert(prefix + "params", tensor(std::span<const std::int64_t>(params)));
  }
  return dict;
}

void Optimizer::load_state_dict(const StateDict& dict) {
  follow_moved_parameters();
  // Everything is read into copies first, so a dict that does not fit changes nothing.
  std::size_t saved_groups = 0;
  while (dict.contains(detail::str_cat("param_groups.", saved_groups, ".params"))) ++saved_groups;
  KILN_CHECK_VALUE(saved_groups == groups_.size(), "loaded state dict has a different number of parameter groups (",
                   saved_groups, ", this optimizer has ", groups_.size(), ")");
  std::set<std::string> known;
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  std::vector<std::pair<std::size_t, std::size_t>> position;  // global index -> (group, index)
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = detail::str_cat("param_groups.", g, ".");
    const Tensor& params = dict.at(prefix + "params");
    KILN_CHECK_VALUE(params.numel() == static_cast<std::int64_t>(groups_[g].params.size()),
                     "loaded state dict contains a parameter group that doesn't match the size of optimizer's group "
                     "(group ", g, ": ", params.numel(), " parameters saved, ", groups_[g].params.size(), " here)");
    known.insert(prefix + "params");
    std::vector<std::string> saved;
    for (const auto& [key, value] : dict) {
      if (auto rest = after(key, prefix); rest && *rest != "params") saved.push_back(*rest);
    }
    options.push_back(groups_[g].options->clone());
    std::vector<std::string> mine = hyperparameter_names(*options.back());
    std::vector<std::string> saved_sorted = saved, mine_sorted = mine;
    std::sort(saved_sorted.begin(), saved_sorted.end());
    std::sort(mine_sorted.begin(), mine_sorted.end());
    KILN_CHECK_VALUE(saved_sorted == mine_sorted, "loaded state dict's parameter group ", g, " has hyperparameters ",
                     joined(saved), " but this optimizer's are ", joined(mine),
                     ": was it saved from another optimizer type?");
    HyperparameterReader reader(dict, prefix);
    options.back()->visit_hyperparameters(reader);
    for (const std::string& n : reader.names) known.insert(prefix + n);
    const Tensor ids = params.to(kCPU, kInt64).flatten();
    for (std::int64_t i = 0; i < ids.numel(); ++i) position.emplace_back(g, static_cast<std::size_t>(i));
  }
  std::vector<std::vector<ParamState>> state(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) state[g].resize(groups_[g].params.size());
  for (const auto& [key, value] : dict) {
    if (known.count(key)) continue;
    std::size_t index = 0;
    int consumed = 0;
    KILN_CHECK_VALUE(std::sscanf(key.c_str(), "state.%zu.%n", &index, &consumed) == 1 && consumed > 0,
                     "unexpected key in optimizer state dict: '", key, "'");
    KILN_CHECK_VALUE(index < position.size(), "loaded state dict has state for parameter ", index,
                     " but this optimizer has ", position.size(), " parameters");
    const auto [g, i] = position[index];
    const std::string name = key.substr(static_cast<std::size_t>(consumed));
    ParamState& s = state[g][i];
    const Tensor& p = groups_[g].params[i];
    if (name == "step") {
      s.step = static_cast<std::int64_t>(value.item<double>());
      continue;
    }
    KILN_CHECK_VALUE(value.sizes() == p.sizes(), "loaded state '", key, "' has shape ", value.sizes(),
                     " but parameter ", index, " has shape ", p.sizes());
    s.buffers[name] = value.to(p.device(), p.dtype(), false, true);
  }
  for (std::size_t g = 0; g < groups_.size(); ++g) groups_[g].options = std::move(options[g]);
  state_ = std::move(state);
}

}  // namespace kiln::optim
