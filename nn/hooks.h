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
// Read next: nn/backward_hook.h (how grad_input and grad_output are caught).
#pragma once

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

/// A module's registered hooks, each list in registration order. A module holds none of this
/// until its first hook is registered (Module::hooks_ stays null, and a call pays one branch).
struct ModuleHooks {
  template <class Hook>
  struct Entry {
    int id;
    Hook fn;
  };
  std::vector<Entry<ForwardPreHook>> forward_pre;
  std::vector<Entry<ForwardHook>> forward;
  std::vector<Entry<FullBackwardHook>> backward;
  int next_id = 0;

  bool empty() const { return forward_pre.empty() && forward.empty() && backward.empty(); }
  /// Removes the hook `id` from whichever list holds it.
  void remove(int id);
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

}  // namespace kiln::detail
