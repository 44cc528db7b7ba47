// nn/module.h — Module: the unit models are built from. A module *registers* its parameters,
// buffers and submodules by name, and everything else (parameters() for the optimizer,
// state_dict() for checkpoints, to() for devices, train()/eval()) walks what was registered.
//
//   struct Mlp : kiln::nn::Module {
//     std::shared_ptr<kiln::nn::Linear> fc1, fc2;
//     Mlp() : Module("Mlp") {
//       fc1 = register_module("fc1", std::make_shared<kiln::nn::Linear>(784, 128));
//       fc2 = register_module("fc2", std::make_shared<kiln::nn::Linear>(128, 10));
//     }
//     kiln::Tensor forward(const kiln::Tensor& x) override { return (*fc2)((*fc1)(x).relu()); }
//   };
//
// Registration is the only way a tensor becomes a parameter: a tensor a module merely holds
// is invisible to parameters(), so the optimizer never updates it (the
// `unregistered-parameter` failure case). See Note [Moving parameters] for to().
// Read next: nn/linear.h, optim/optimizer.h.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/capture_hooks.h"
#include "core/state_dict.h"
#include "core/tensor.h"
#include "nn/hooks.h"
#include "nn/named_tensors.h"

namespace kiln::nn {

// Note [Module calls]
// ~~~~~~~~~~~~~~~~~~~
// `module(x)` is a call; `module.forward(x)` is only the computation, as in PyTorch, where
// __call__ runs the hooks around forward. So a module calls its children with `(*child)(x)`
// (Sequential, the Transformer's layers, attention's projection), and hooks fire for every
// module, containers included; code that calls forward() directly skips them, as in PyTorch.
// A module with no hook pays two predictable branches per call: its own hooks' null pointer
// and a relaxed load of the flag that says a global hook (register_module_forward_hook, ...)
// is registered. Modules whose
// forward takes or returns several tensors (LSTM, MultiheadAttention, the Transformer's
// layers, the cells, the losses' input and target) test has_hooks() in their own operator()
// and hand call_with_hooks their tensors as a list. Implemented in nn/hooks.cpp.

/// What load_state_dict(strict = false) did not match (PyTorch's _IncompatibleKeys).
struct IncompatibleKeys {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module {
 public:
  explicit Module(std::string type_name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The single-input forward; modules with other signatures add their own overloads. The
  /// default throws, naming the module type.
  virtual Tensor forward(const Tensor& input);
  /// Calls forward between this module's hooks. See Note [Module calls].
  Tensor operator()(const Tensor& input) {
    if (!has_hooks()) [[likely]] return forward(input);
    return call_with_hooks({input}, [this](const TensorList& args) { return TensorList{forward(args[0])}; })[0];
  }

  // --- hooks (nn/hooks.h) -----------------------------------------------------------------------
  /// `hook(module, args)` runs before each call's forward; it may return replacement args.
  /// A hook may also return nothing (void): a hook that only looks. `{.prepend = true}` runs
  /// it before the hooks already registered.
  template <class Hook>
  RemovableHandle register_forward_pre_hook(Hook hook, HookOptions options = {}) {
    return add_hook(&ModuleHooks::forward_pre,
                    ForwardPreHook(detail::returning_optional<Hook, Module&, const TensorList&>(std::move(hook))),
                    options.prepend);
  }
  /// `hook(module, args, output)` runs after each call's forward; it may return a replacement
  /// output (as many tensors as forward returned). With `{.always_call = true}` it also runs
  /// when forward or an earlier hook throws, with the output so far (empty when forward threw);
  /// the exception then goes on, and one the hook throws itself becomes a warning.
  template <class Hook>
  RemovableHandle register_forward_hook(Hook hook, ForwardHookOptions options = {}) {
    return add_hook(&ModuleHooks::forward,
                    ForwardHook(detail::returning_optional<Hook, Module&, const TensorList&, const TensorList&>(
                        std::move(hook))),
                    options.prepend, options.always_call);
  }
  /// `hook(module, grad_input, grad_output)` runs in backward once the gradients of this call's
  /// inputs are computed; it may return a replacement grad_input. See Note [Full backward hooks].
  template <class Hook>
  RemovableHandle register_full_backward_hook(Hook hook, HookOptions options = {}) {
    return add_hook(&ModuleHooks::backward,
                    FullBackwardHook(detail::returning_optional<Hook, Module&, const TensorList&, const TensorList&>(
                        std::move(hook))),
                    options.prepend);
  }
  /// `hook(module, grad_output)` runs in backward once the gradients of this call's outputs are
  /// known, before the module's own nodes; it may return a replacement grad_output, which is
  /// what flows into the module. See Note [Full backward hooks].
  template <class Hook>
  RemovableHandle register_full_backward_pre_hook(Hook hook, HookOptions options = {}) {
    return add_hook(&ModuleHooks::backward_pre,
                    FullBackwardPreHook(detail::returning_optional<Hook, Module&, const TensorList&>(std::move(hook))),
                    options.prepend);
  }

  // --- registration ---------------------------------------------------------------------------
  /// Registers `tensor` as parameter `name` and returns the module's own handle to it. The
  /// parameter is a new leaf over the tensor's memory (zero-copy) with `requires_grad`. A
  /// tensor with a grad_fn is refused: a parameter must be a leaf. An undefined tensor
  /// registers an empty slot (like PyTorch's `register_parameter('bias', None)`).
  Tensor& register_parameter(const std::string& name, const Tensor& tensor, bool requires_grad = true);
  /// Registers state that is not trained (running statistics); persistent buffers are saved
  /// in state_dict().
  Tensor& register_buffer(const std::string& name, const Tensor& tensor, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // --- traversal (registration order, depth first, dotted names) --------------------------------
  TensorList parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  TensorList buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  /// This module and every descendant, depth first.
  std::vector<Module*> modules();
  std::vector<std::pair<std::string, Module*>> named_modules(const std::string& prefix = "");
  /// Number of parameter elements (only those that require grad when `trainable_only`).
  std::int64_t num_parameters(bool trainable_only = false) const;

  // --- modes and state ---------------------------------------------------------------------------
  /// Training mode (dropout active, batch norm uses batch statistics) for this module and all
  /// descendants.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const {
    if (capture::observer() != nullptr) [[unlikely]] note_mode_read();
    return *training_;
  }
  /// Sets every parameter's gradient to none (default) or to zeros.
  void zero_grad(bool set_to_none = true);
  /// Calls fn on this module and every descendant.
  void apply(const std::function<void(Module&)>& fn);

  /// Moves parameters and buffers to `device` and/or casts the floating ones to `dtype`.
  /// See Note [Moving parameters].
  Module& to(Device device);
  Module& to(DType dtype);
  Module& to(Device device, DType dtype);

  /// Exchanges each parameter and buffer named in `tensors` (dotted names, same shapes) with
  /// the tensor there: the module now computes with the given tensors, and `tensors` holds
  /// the module's own. Calling it again with the same dict swaps them back. This is how
  /// kiln::memory::plan runs a model on meta twins of its weights without touching them
  /// (PyTorch's torch.func.functional_call does the same for one call).
  void swap_tensors(StateDict& tensors);

  /// Parameters and persistent buffers by dotted name.
  StateDict state_dict() const;
  /// Copies values from `dict` into this module's tensors (keeping their identity). With
  /// `strict`, missing and unexpected keys are errors, in PyTorch's words; without, they are
  /// returned (a backbone loads into a model with a new head). Shape mismatches are always
  /// errors.
  IncompatibleKeys load_state_dict(const StateDict& dict, bool strict = true);

  const std::string& type_name() const { return type_name_; }
  /// The "in_features=784, out_features=512, bias=True" part of the printed tree.
  virtual std::string extra_repr() const { return ""; }
  /// The module tree printed like PyTorch's repr.
  std::string repr(int indent = 0) const;

 protected:
  struct Slot {
    std::string name;
    std::unique_ptr<Tensor> tensor;  // heap-held so that references to it stay valid
    bool persistent = true;
  };

  /// True when some hook is registered, on this module or globally: a module with its own
  /// operator() overloads tests this and, when true, routes the call through call_with_hooks.
  bool has_hooks() const {
    const bool hooked = hooks_ != nullptr || detail::global_module_hooks_registered();
    if (!hooked && capture::observer() != nullptr) [[unlikely]] note_no_hooks();
    return hooked;
  }
  /// Runs `forward_fn(args)` between the hooks: forward pre-hooks, full backward hooks' input
  /// side, forward_fn, forward hooks, full backward hooks' output side. `args` and the result
  /// are the call's tensors in forward's parameter order (undefined where absent).
  TensorList call_with_hooks(TensorList args, const std::function<TensorList(const TensorList&)>& forward_fn);
  /// operator() of a forward that takes two tensors and returns one (a loss's input and target,
  /// a cell's input and state): `forward_fn(a, b)`, between the hooks when there are any.
  template <class Forward>
  Tensor call_two_tensors(const Tensor& a, const Tensor& b, const Forward& forward_fn) {
    if (!has_hooks()) [[likely]] return forward_fn(a, b);
    return call_with_hooks({a, b}, [&forward_fn](const TensorList& args) {
      return TensorList{forward_fn(args[0], args[1])};
    })[0];
  }

 private:
  template <class List, class Hook>
  RemovableHandle add_hook(List ModuleHooks::*list, Hook hook, bool prepend, bool always_call = false) {
    if (!hooks_) hooks_ = std::make_shared<ModuleHooks>();
    const int id = ModuleHooks::add(hooks_.get()->*list, std::move(hook), prepend, always_call);
    return RemovableHandle([registered = std::weak_ptr<ModuleHooks>(hooks_), id] {
      if (const auto hooks = registered.lock()) hooks->remove(id);
    });
  }
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  /// Tell the capture running on this thread that its step depends on this module's mode, or
  /// on its having no hooks (Note [What a graph assumed of its modules] in compile/capture.h).
  void note_mode_read() const;
  void note_no_hooks() const;
  void check_new_name(const std::string& name, const char* what) const;
  void move_tensors(std::optional<Device> device, std::optional<DType> dtype);
  /// The defined tensors of `slots` (parameters_ or buffers_) here and, with `recurse`, in every
  /// descendant, under dotted names: named_parameters' and named_buffers' one walk.
  NamedTensors named_slots(std::vector<Slot> Module::*slots, bool recurse) const;

  std::string type_name_;
  std::vector<Slot> parameters_;
  std::vector<Slot> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  // Shared so that a captured graph can hold it weakly: it sees eval() after the capture, and
  // that the module is gone.
  std::shared_ptr<bool> training_ = std::make_shared<bool>(true);
  std::shared_ptr<ModuleHooks> hooks_;  // null until a hook is registered
};

std::ostream& operator<<(std::ostream& os, const Module& m);

/// The tensor a parameter became after Module::to() replaced it (following the forwarding
/// record), or the parameter itself. See Note [Moving parameters].
Tensor current(const Tensor& parameter);

}  // namespace kiln::nn
