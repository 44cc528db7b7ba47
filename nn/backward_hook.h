// nn/backward_hook.h — how register_full_backward_hook learns a module's grad_input and
// grad_output (PyTorch's torch.utils.hooks.BackwardHook). A module is not one node of the
// backward graph but many, so the call wraps the module's inputs and outputs in identity nodes
// (BackwardHookFunctionBackward) that see the gradients pass. See Note [Full backward hooks].
// Read next: nn/module.cpp (Module::call_with_hooks).
#pragma once

#include <memory>
#include <vector>

#include "nn/hooks.h"

namespace kiln::nn {

// Note [Full backward hooks]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// One call of a module with full backward hooks builds one BackwardHook. Before forward,
// setup_input_hook passes the tensors that require grad through an identity node; after
// forward (and the forward hooks), setup_output_hook passes the results through another.
// In backward the output node runs first, since everything the module computed depends on
// it: it keeps the incoming gradients as grad_output, after the full backward pre-hooks (in
// order, each able to replace grad_output, which is then what flows into the module's own
// nodes) have seen them. The input node runs last, once every
// node of the module has run: its incoming gradients are grad_input, and the user's hooks
// run there, in registration order, each one able to replace grad_input. So hooks fire in
// the order backward finishes modules: the last layer first, a container after all of its
// children. Two edge cases follow PyTorch:
//  - no input requires grad (the first layer of a network, whose input is data): the hooks
//    run at the output node, with every grad_input undefined, and may not replace it;
//  - no output received a gradient: the hooks do not run.
// The hooks registered when the module was called are the ones that run; one removed later
// still runs for that call, as in PyTorch. Global hooks (register_module_full_backward_hook,
// register_module_full_backward_pre_hook) come first in each list.
class BackwardHook : public std::enable_shared_from_this<BackwardHook> {
 public:
  BackwardHook(Module& module, std::vector<FullBackwardHook> hooks, std::vector<FullBackwardPreHook> pre_hooks);

  /// Wraps the arguments that require grad (when grad mode is on); returns the arguments.
  TensorList setup_input_hook(TensorList args);
  /// Wraps the results that require grad; returns the results.
  TensorList setup_output_hook(TensorList results);

  // --- called by the identity nodes in backward ------------------------------------------------
  /// The gradients reaching the module's outputs (one per wrapped result).
  TensorList on_grad_output(TensorList grads);
  /// The gradients of the module's inputs (one per wrapped argument), as the hooks leave them.
  TensorList on_grad_input(TensorList grads);

 private:
  enum class Side { Input, Output };
  /// Passes args[i] for i in `indices` through one identity node for `side`.
  TensorList wrap(TensorList args, const std::vector<std::size_t>& indices, Side side);
  static TensorList scatter(const std::vector<std::size_t>& indices, const TensorList& values, std::size_t size);

  Module& module_;
  std::vector<FullBackwardHook> hooks_;
  std::vector<FullBackwardPreHook> pre_hooks_;
  std::size_t n_inputs_ = 0;
  std::size_t n_outputs_ = 0;
  std::vector<std::size_t> input_indices_;   // arguments wrapped (empty: none required grad)
  std::vector<std::size_t> output_indices_;  // results wrapped
  std::optional<TensorList> grad_outputs_;   // set by the output node, used by the input node
};

}  // namespace kiln::nn
