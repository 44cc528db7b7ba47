// nn/hooks.cpp — a module call with hooks (Note [Module calls] in nn/module.h) and the
// removal of a hook by its handle.
#include <algorithm>

#include "core/capture_hooks.h"
#include "nn/backward_hook.h"
#include "nn/module.h"

namespace kiln::nn {

void ModuleHooks::remove(int id) {
  const auto has_id = [id](const auto& entry) { return entry.id == id; };
  std::erase_if(forward_pre, has_id);
  std::erase_if(forward, has_id);
  std::erase_if(backward, has_id);
}

TensorList Module::call_with_hooks(TensorList args, const std::function<TensorList(const TensorList&)>& forward_fn) {
  // Copies: a hook may remove itself (or register another) while the lists are walked, and the
  // backward side keeps the hooks of this call (Note [Full backward hooks]).
  const ModuleHooks hooks = *hooks_;
  // Every hook was removed: the next call takes the branch-free path again.
  if (hooks.empty()) hooks_.reset();
  // A hook is host code the kernel list of a compiled step cannot replay.
  if (!hooks.empty()) capture::not_replayable("a module hook (" + type_name() + ")");

  for (const auto& [id, hook] : hooks.forward_pre) {
    if (std::optional<TensorList> replaced = hook(*this, args)) args = std::move(*replaced);
  }
  std::shared_ptr<BackwardHook> backward_hook;
  if (!hooks.backward.empty()) {
    std::vector<FullBackwardHook> fns;
    for (const auto& [id, hook] : hooks.backward) fns.push_back(hook);
    backward_hook = std::make_shared<BackwardHook>(*this, std::move(fns));
    args = backward_hook->setup_input_hook(std::move(args));
  }
  TensorList output = forward_fn(args);
  for (const auto& [id, hook] : hooks.forward) {
    std::optional<TensorList> replaced = hook(*this, args, output);
    if (!replaced) continue;
    KILN_CHECK(replaced->size() == output.size(), "forward hook of ", type_name(), " returned ", replaced->size(),
               " tensors, but its forward returns ", output.size());
    output = std::move(*replaced);
  }
  if (backward_hook) output = backward_hook->setup_output_hook(std::move(output));
  return output;
}

}  // namespace kiln::nn
