// nn/hooks.h — module hooks: code that runs around a module's call without editing the module,
// as PyTorch's register_forward_pre_hook / register_forward_hook / register_full_backward_hook.
// The usual use is to look inside a model: keep every layer's activation, or every layer's
// gradient, for a plot or a debugging session.
//
//   std::map<std::string, kiln::Tensor> acts;
//   for (auto& [name, m] : model.named_modules())
//     m->register_forward_hook([&acts, name](Module&, const TensorList&, const TensorList& out) {
//       acts[name] = out[0].detach();
//     });
//
// Hooks see a module's tensor arguments and results as lists, in the order of its forward's
// parameters (an undefined Tensor where an optional one was not given). They fire only when
// the module is called through operator() (see Note [Module calls] in nn/module.h).
// Global hooks (register_module_forward_hook, ...) fire for every module, before its own.
// Read next: nn/backward_hook.h (how grad_input and grad_output are caught).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln::nn {

class Module;

/// PyTorch's torch.utils.hooks.RemovableHandle: `handle.remove()` detaches the hook; removing
/// twice, or after the module is gone, does nothing.
using RemovableHandle = HookHandle;

/// Runs before forward with its arguments; returning a list replaces them.
using ForwardPreHook = std::function<std::optional<TensorList>(Module& module, const TensorList& args)>;
/// Runs after forward with its arguments and results; returning a list replaces the results.
using ForwardHook =
    std::function<std::optional<TensorList>(Module& module, const TensorList& args, const TensorList& output)>;
/// Runs in backward once the gradients of the module's inputs are known, with those
/// (grad_input) and the gradients of its outputs (grad_output); returning a list replaces
/// grad_input. An entry is undefined where its tensor had no gradient.
using FullBackwardHook = std::function<std::optional<TensorList>(Module& module, const TensorList& grad_input,
                                                                 const TensorList& grad_output)>;
/// Runs in backward once the gradients of the module's outputs are known (before any of the
/// module's own nodes run); returning a list replaces grad_output, which then flows into the
/// module.
using FullBackwardPreHook = std::function<std::optional<TensorList>(Module& module, const TensorList& grad_output)>;

// PyTorch's keyword arguments of the register_* calls, as designated initializers:
// `m.register_forward_hook(h, {.prepend = true, .always_call = true})`. PyTorch's
// `with_kwargs` has no counterpart: a C++ forward has no keyword arguments, and the tensors a
// module takes as options (a mask in MultiheadAttentionForwardOptions) are already in the
// hooks' argument list, in forward's parameter order.
struct HookOptions {
  bool prepend = false;  // run before the hooks already registered, not after them
};
struct ForwardHookOptions {
  bool prepend = false;
  bool always_call = false;  // run even when forward (or an earlier hook) throws
};
struct GlobalForwardHookOptions {
  bool always_call = false;
};

/// A module's registered hooks, each list in the order they run. A module holds none of this
/// until its first hook is registered (Module::hooks_ stays null, and a call pays one branch).
struct ModuleHooks {
  template <class Hook>
  struct Entry {
    int id;
    Hook fn;
    bool always_call = false;  // forward hooks only
  };
  std::vector<Entry<ForwardPreHook>> forward_pre;
  std::vector<Entry<ForwardHook>> forward;
  std::vector<Entry<FullBackwardHook>> backward;
  std::vector<Entry<FullBackwardPreHook>> backward_pre;

  bool empty() const { return forward_pre.empty() && forward.empty() && backward.empty() && backward_pre.empty(); }
  /// Removes the hook `id` from whichever list holds it.
  void remove(int id);
  /// Puts `hook` first (prepend) or last in `list`, under a new id, and returns the id.
  template <class Hook>
  static int add(std::vector<Entry<Hook>>& list, Hook hook, bool prepend, bool always_call = false) {
    const int id = next_id();
    Entry<Hook> entry{id, std::move(hook), always_call};
    if (prepend) list.insert(list.begin(), std::move(entry));
    else list.push_back(std::move(entry));
    return id;
  }
  /// Ids are unique across every module and the global hooks, as PyTorch's RemovableHandle ids.
  static int next_id();
};

}  // namespace kiln::nn

namespace kiln::detail {

/// A hook written the Python way, returning nothing (`void`), becomes one returning
/// std::nullopt: "keep what was there".
template <class Hook, class... Args>
auto returning_optional(Hook hook) {
  return [hook = std::move(hook)](Args... args) -> std::optional<TensorList> {
    if constexpr (std::is_void_v<std::invoke_result_t<Hook&, Args...>>) {
      hook(std::forward<Args>(args)...);
      return std::nullopt;
    } else {
      return hook(std::forward<Args>(args)...);
    }
  };
}


/// True while some global module hook is registered: Module::operator() tests this beside its
/// own hooks, a relaxed load on the path of every call (Note [Module calls]).
inline std::atomic<bool> g_global_module_hooks{false};
inline bool global_module_hooks_registered() { return g_global_module_hooks.load(std::memory_order_relaxed); }
/// The global hooks now, copied (empty when none is registered).
nn::ModuleHooks global_module_hooks();
nn::RemovableHandle add_global_forward_pre_hook(nn::ForwardPreHook hook);
nn::RemovableHandle add_global_forward_hook(nn::ForwardHook hook, bool always_call);
nn::RemovableHandle add_global_backward_hook(nn::FullBackwardHook hook);
nn::RemovableHandle add_global_backward_pre_hook(nn::FullBackwardPreHook hook);
}  // namespace kiln::detail

namespace kiln::nn {

// PyTorch's torch.nn.modules.module.register_module_*_hook: hooks every module's call runs,
// before the module's own hooks of the same kind (in registration order among themselves).
// The handle's remove() unregisters them.

/// `hook(module, args)` before every module's forward; may return replacement args.
template <class Hook>
RemovableHandle register_module_forward_pre_hook(Hook hook) {
  return detail::add_global_forward_pre_hook(
      ForwardPreHook(detail::returning_optional<Hook, Module&, const TensorList&>(std::move(hook))));
}
/// `hook(module, args, output)` after every module's forward; may return a replacement output.
template <class Hook>
RemovableHandle register_module_forward_hook(Hook hook, GlobalForwardHookOptions options = {}) {
  return detail::add_global_forward_hook(
      ForwardHook(
          detail::returning_optional<Hook, Module&, const TensorList&, const TensorList&>(std::move(hook))),
      options.always_call);
}
/// `hook(module, grad_input, grad_output)` in every module's backward (Note [Full backward hooks]).
template <class Hook>
RemovableHandle register_module_full_backward_hook(Hook hook) {
  return detail::add_global_backward_hook(FullBackwardHook(
      detail::returning_optional<Hook, Module&, const TensorList&, const TensorList&>(std::move(hook))));
}
/// `hook(module, grad_output)` in every module's backward before its own nodes run.
template <class Hook>
RemovableHandle register_module_full_backward_pre_hook(Hook hook) {
  return detail::add_global_backward_pre_hook(
      FullBackwardPreHook(detail::returning_optional<Hook, Module&, const TensorList&>(std::move(hook))));
}

}  // namespace kiln::nn
