// autograd/saved_tensors_hooks.h — PyTorch's torch.autograd.graph.saved_tensors_hooks: while a
// guard is alive, every tensor an op saves for backward is handed to `pack`, and the graph keeps
// what pack returned instead of the tensor; backward gets the tensor back from `unpack`. This
// is the layer activation checkpointing stands on (nn/checkpoint.h): pack keeps a number,
// unpack recomputes. Other uses: offloading saved tensors to the host, compressing them.
//
//   autograd::SavedTensorsHooksGuard g({
//       .pack = [](const Tensor& t) { return std::any(t.to(kCPU)); },
//       .unpack = [](const std::any& p) { return std::any_cast<Tensor>(p).to(kCUDA); }});
//
// With no guard alive, saving a tensor costs one thread-local test.
// Read next: autograd/saved_variable.h, nn/checkpoint.h.
#pragma once

#include <any>
#include <functional>
#include <memory>

#include "core/scoped_value.h"
#include "core/tensor.h"

namespace kiln::autograd {

struct SavedTensorsHooks {
  std::function<std::any(const Tensor&)> pack;
  std::function<Tensor(const std::any&)> unpack;
  /// Whether pack and unpack only choose among tensors, every value being made by ops (which
  /// a compiled step's capture records), as checkpointing's do; other hooks' host code (a
  /// copy kept in a list, a file) makes a step that saves through them run eagerly.
  bool made_by_ops = false;
};

/// Installs `hooks` for the tensors saved on this thread while it lives; guards nest, the
/// innermost wins.
class SavedTensorsHooksGuard {
 public:
  explicit SavedTensorsHooksGuard(SavedTensorsHooks hooks);

 private:
  ScopedValue<std::shared_ptr<const SavedTensorsHooks>> hooks_;
};

namespace detail {
inline thread_local std::shared_ptr<const SavedTensorsHooks> t_saved_tensors_hooks;
}  // namespace detail

/// The hooks a tensor saved now goes through (null when no guard is alive).
inline const std::shared_ptr<const SavedTensorsHooks>& current_saved_tensors_hooks() {
  return detail::t_saved_tensors_hooks;
}

}  // namespace kiln::autograd
