// optim/optimizer.cpp — the Optimizer base.
#include "optim/optimizer.h"

#include <set>

#include "autograd/grad_mode.h"
#include "core/creation.h"

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
  NoGradGuard no_grad;
  follow_moved_parameters();
  for (auto& group : groups_) {
    for (Tensor& p : group.params) {
      Tensor& g = p.mutable_grad();
      if (!g.defined()) continue;
      if (set_to_none) g = Tensor();
      else g.zero_();
    }
  }
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict dict;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    dict.insert(detail::str_cat("param_groups.", g, ".lr"), tensor(groups_[g].options->lr, kFloat64));
    for (std::size_t i = 0; i < state_[g].size(); ++i) {
      const ParamState& s = state_[g][i];
      if (s.step == 0) continue;
      const std::string prefix = detail::str_cat("state.", g, ".", i, ".");
      dict.insert(prefix + "step", tensor(s.step));
      for (const auto& [name, buffer] : s.buffers) dict.insert(prefix + name, buffer.detach());
    }
  }
  return dict;
}

void Optimizer::load_state_dict(const nn::StateDict& dict) {
  for (const auto& [key, value] : dict) {
    std::size_t g = 0, i = 0;
    char name[128] = {0};
    if (std::sscanf(key.c_str(), "param_groups.%zu.lr", &g) == 1 && key.find(".lr") == key.size() - 3) {
      KILN_CHECK_VALUE(g < groups_.size(), "loaded state dict has a parameter group ", g, " but this optimizer has ",
                       groups_.size());
      groups_[g].options->lr = value.item<double>();
    } else if (std::sscanf(key.c_str(), "state.%zu.%zu.%127s", &g, &i, name) == 3) {
      KILN_CHECK_VALUE(g < state_.size() && i < state_[g].size(), "loaded state dict has state for group ", g,
                       ", parameter ", i, ", which this optimizer does not have");
      ParamState& s = state_[g][i];
      const Tensor& p = groups_[g].params[i];
      if (std::string(name) == "step") {
        s.step = value.item<std::int64_t>();
      } else {
        KILN_CHECK_VALUE(value.sizes() == p.sizes(), "loaded state '", key, "' has shape ", value.sizes(),
                         " but the parameter has shape ", p.sizes());
        s.buffers[name] = value.to(p.device(), p.dtype(), false, true);
      }
    } else {
      KILN_FAIL("unexpected key in optimizer state dict: '", key, "'");
    }
  }
}

}  // namespace kiln::optim
