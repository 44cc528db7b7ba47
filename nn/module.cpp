// nn/module.cpp — registration, traversal, modes, device moves and state dicts.
#include "nn/module.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <sstream>

#include "core/autograd_meta.h"
#include "core/grad_mode.h"

namespace kiln::nn {

// Note [Moving parameters]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A tensor's device and dtype are terms fixed at creation, so module.to(device) cannot move a
// parameter in place the way PyTorch swaps a Parameter's .data: it creates a new leaf on the
// new device, registers it under the same name, and leaves a forwarding record (the old
// tensor's `successor`). The module's own handle (the reference its layer code holds) now
// names the new tensor. Anyone still holding the old tensor — typically an optimizer built
// before the move — follows the record with nn::current() at its next step, and moves its
// per-parameter state (momentum, Adam moments) along. The old tensor itself is unchanged: its
// terms are still true of it. Gradients move with the parameter.

Tensor current(const Tensor& parameter) {
  Tensor t = parameter;
  while (t.defined()) {
    const AutogradMeta* meta = t.impl()->autograd_meta_if_exists();
    if (meta == nullptr || !meta->successor.defined()) break;
    t = meta->successor;
  }
  return t;
}

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}

Tensor Module::forward(const Tensor&) {
  KILN_FAIL(type_name_, " has no single-input forward(); call its own forward overload");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  KILN_CHECK(!name.empty(), what, " name can't be empty string \"\"");
  KILN_CHECK(name.find('.') == std::string::npos, what, " name can't contain \".\" (got '", name, "')");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& s) { return s.name == name; });
  };
  const bool child = std::any_of(children_.begin(), children_.end(),
                                 [&](const auto& c) { return c.first == name; });
  KILN_CHECK(!taken(parameters_) && !taken(buffers_) && !child, "attribute '", name,
             "' already exists in ", type_name_);
}

Tensor& Module::register_parameter(const std::string& name, const Tensor& tensor, bool requires_grad) {
  check_new_name(name, "parameter");
  Tensor param;
  if (tensor.defined()) {
    KILN_CHECK(tensor.is_leaf(), "cannot register parameter '", name, "' in ", type_name_,
               ": the tensor is the output of ", node_name(*tensor.grad_fn()),
               " (it has a grad_fn), and a parameter must be a leaf whose gradient accumulates. "
               "Create it with a factory, or register tensor.detach() to cut its history.\n",
               msg::blame("tensor", tensor));
    // A new contract over the same memory: a leaf with the requires_grad asked for.
    param = tensor.as_leaf(requires_grad);
    param.impl()->autograd_meta().name = name;
  }
  parameters_.push_back({name, std::make_unique<Tensor>(std::move(param)), true});
  return *parameters_.back().tensor;
}

Tensor& Module::register_buffer(const std::string& name, const Tensor& tensor, bool persistent) {
  check_new_name(name, "buffer");
  KILN_CHECK(!tensor.defined() || !tensor.requires_grad(), "cannot register buffer '", name,
             "' in ", type_name_, ": buffers hold state that is not trained, but this tensor "
             "requires grad. Register it as a parameter, or pass tensor.detach().");
  buffers_.push_back({name, std::make_unique<Tensor>(tensor), persistent});
  return *buffers_.back().tensor;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  KILN_CHECK(module != nullptr, "cannot register a null module as '", name, "'");
  // Graph labels carry the dotted path ("features.0.weight").
  for (auto& [n, p] : module->named_parameters()) p.impl()->autograd_meta().name = name + "." + n;
  children_.emplace_back(name, std::move(module));
}

namespace {

TensorList tensors_of(const NamedTensors& named) {
  TensorList out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

}  // namespace

NamedTensors Module::named_slots(std::vector<Slot> Module::*slots, bool recurse) const {
  NamedTensors out;
  for (const Slot& s : this->*slots) {
    if (s.tensor->defined()) out.emplace_back(s.name, *s.tensor);
  }
  if (recurse) {
    for (const auto& [name, child] : children_) {
      for (auto& [n, t] : child->named_slots(slots, true)) out.emplace_back(name + "." + n, t);
    }
  }
  return out;
}

TensorList Module::parameters(bool recurse) const { return tensors_of(named_parameters(recurse)); }
NamedTensors Module::named_parameters(bool recurse) const { return named_slots(&Module::parameters_, recurse); }
TensorList Module::buffers(bool recurse) const { return tensors_of(named_buffers(recurse)); }
NamedTensors Module::named_buffers(bool recurse) const { return named_slots(&Module::buffers_, recurse); }

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

std::vector<Module*> Module::modules() {
  std::vector<Module*> out;
  for (auto& [name, m] : named_modules()) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules(const std::string& prefix) {
  std::vector<std::pair<std::string, Module*>> out{{prefix, this}};
  for (auto& [name, child] : children_) {
    for (auto& entry : child->named_modules(prefix.empty() ? name : prefix + "." + name)) {
      out.push_back(entry);
    }
  }
  return out;
}

std::int64_t Module::num_parameters(bool trainable_only) const {
  std::int64_t n = 0;
  for (const Tensor& p : parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
}

void Module::train(bool on) {
  // Inside a captured step, the mode set is the step's own doing: a region sets it again at
  // each replay, and the step's later reads of it are no conditions of the graph (Note [What a
  // graph assumed of its modules]).
  std::optional<capture::Region> region;
  if (capture::observer() != nullptr) [[unlikely]] {
    std::vector<std::weak_ptr<bool>> modes;
    apply([&](Module& m) {
      modes.push_back(m.training_);
      capture::state_set(m.training_.get());
    });
    region.emplace("Module.train", [modes = std::move(modes), on] {
      for (const std::weak_ptr<bool>& mode : modes) {
        if (const std::shared_ptr<bool> m = mode.lock()) *m = on;
      }
    });
  }
  *training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::note_mode_read() const {
  const bool training = *training_;
  capture::depends_on(training_.get(), [mode = std::weak_ptr<const bool>(training_), training] {
    const std::shared_ptr<const bool> now = mode.lock();
    return now != nullptr && *now == training;
  });
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    if (set_to_none) capture::grad_unbound(p);
    Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    if (set_to_none) g = Tensor();
    else g.zero_();
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (Module* m : modules()) fn(*m);
}

void Module::move_tensors(std::optional<Device> device, std::optional<DType> dtype) {
  NoGradGuard no_grad;
  auto target = [&](const Tensor& t) {
    const Device d = device.value_or(t.device());
    // Like PyTorch, to(dtype) casts floating tensors only (not integer buffers or indices).
    const DType ty = dtype && t.is_floating_point() ? *dtype : t.dtype();
    return std::pair{d, ty};
  };
  for (Slot& s : parameters_) {
    Tensor& old = *s.tensor;
    if (!old.defined()) continue;
    const auto [d, ty] = target(old);
    if (d == old.device() && ty == old.dtype()) continue;
    Tensor moved = old.detach().to(d, ty, false, true).as_leaf(old.requires_grad());
    AutogradMeta& meta = old.impl()->autograd_meta();
    AutogradMeta& new_meta = moved.impl()->autograd_meta();
    new_meta.name = meta.name;
    if (meta.grad.defined()) new_meta.grad = meta.grad.to(d, ty);
    meta.successor = moved;  // the forwarding record
    old = moved;
    capture::held_state_changed();
  }
  for (Slot& s : buffers_) {
    Tensor& b = *s.tensor;
    if (!b.defined()) continue;
    const auto [d, ty] = target(b);
    if (d == b.device() && ty == b.dtype()) continue;
    b = b.to(d, ty);
    capture::held_state_changed();
  }
  for (auto& c : children_) c.second->move_tensors(device, dtype);
}

Module& Module::to(Device device) {
  move_tensors(device, std::nullopt);
  return *this;
}
Module& Module::to(DType dtype) {
  move_tensors(std::nullopt, dtype);
  return *this;
}
Module& Module::to(Device device, DType dtype) {
  move_tensors(device, dtype);
  return *this;
}

void Module::swap_tensors(StateDict& tensors) {
  std::vector<std::pair<Tensor*, Tensor*>> pairs;  // checked whole before anything moves
  std::size_t found = 0;
  std::function<void(Module&, const std::string&)> walk = [&](Module& m, const std::string& prefix) {
    for (auto* slots : {&m.parameters_, &m.buffers_}) {
      for (Slot& s : *slots) {
        const std::string name = prefix + s.name;
        if (!tensors.contains(name)) continue;
        Tensor& replacement = tensors[name];
        KILN_CHECK(!s.tensor->defined() || replacement.sizes() == s.tensor->sizes(), "swap_tensors: '", name,
                   "' has shape ", s.tensor->sizes(), " but the replacement has shape ", replacement.sizes());
        pairs.emplace_back(s.tensor.get(), &replacement);
        ++found;
      }
    }
    for (const auto& [name, child] : m.children_) walk(*child, prefix + name + ".");
  };
  walk(*this, "");
  if (found != tensors.size()) {
    for (const auto& [name, t] : tensors) {
      const bool known = std::any_of(pairs.begin(), pairs.end(), [&](const auto& p) { return p.second == &tensors[name]; });
      KILN_CHECK(known, "swap_tensors: ", type_name_, " has no parameter or buffer '", name, "'");
    }
  }
  for (auto& [own, given] : pairs) std::swap(*own, *given);
}

StateDict Module::state_dict() const {
  StateDict dict;
  std::function<void(const Module&, const std::string&)> walk = [&](const Module& m, const std::string& prefix) {
    for (const Slot& s : m.parameters_) {
      if (s.tensor->defined()) dict.insert(prefix + s.name, s.tensor->detach());
    }
    for (const Slot& s : m.buffers_) {
      if (s.tensor->defined() && s.persistent) dict.insert(prefix + s.name, s.tensor->detach());
    }
    for (const auto& [name, child] : m.children_) walk(*child, prefix + name + ".");
  };
  walk(*this, "");
  return dict;
}

IncompatibleKeys Module::load_state_dict(const StateDict& dict, bool strict) {
  const StateDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : own) {
    const Tensor* src = dict.find(name);
    if (src == nullptr) {
      missing.push_back(name);
    } else if (src->sizes() != t.sizes()) {
      mismatched.push_back(detail::str_cat("size mismatch for ", name, ": copying a param with shape ",
                                           src->sizes(), " from checkpoint, the shape in current model is ",
                                           t.sizes(), "."));
    }
  }
  for (const auto& [name, t] : dict) {
    if (!own.contains(name)) unexpected.push_back(name);
  }
  std::ostringstream errors;
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (std::size_t i = 0; i < names.size(); ++i) s += (i ? ", \"" : "\"") + names[i] + "\"";
    return s;
  };
  if (strict && !missing.empty()) errors << "\n\tMissing key(s) in state_dict: " << list(missing) << ". ";
  if (strict && !unexpected.empty()) errors << "\n\tUnexpected key(s) in state_dict: " << list(unexpected) << ". ";
  for (const std::string& m : mismatched) errors << "\n\t" << m;
  KILN_CHECK(errors.str().empty(), "Error(s) in loading state_dict for ", type_name_, ":", errors.str());
  // Copy values into the existing tensors: parameters keep their identity (an optimizer
  // holding them keeps working) and their device; dtypes convert.
  NoGradGuard no_grad;
  for (const auto& [name, t] : own) {
    if (const Tensor* src = dict.find(name)) t.copy_(*src);
  }
  return {missing, unexpected};
}

std::string Module::repr(int indent) const {
  std::ostringstream os;
  os << type_name_ << "(" << extra_repr();
  if (!children_.empty()) {
    os << "\n";
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    for (const auto& [name, child] : children_) os << pad << "(" << name << "): " << child->repr(indent + 2) << "\n";
    os << std::string(static_cast<std::size_t>(indent), ' ');
  }
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.repr(); }

}  // namespace kiln::nn
