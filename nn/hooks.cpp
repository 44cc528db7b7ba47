// nn/hooks.cpp — a module call with hooks (Note [Module calls] in nn/module.h), the global
// hooks' registry, and the removal of a hook by its handle.
#include <algorithm>
#include <exception>
#include <mutex>

#include "core/capture_hooks.h"
#include "core/warning.h"
#include "nn/backward_hook.h"
#include "nn/module.h"

namespace kiln::nn {

void ModuleHooks::remove(int id) {
  const auto has_id = [id](const auto& entry) { return entry.id == id; };
  std::erase_if(forward_pre, has_id);
  std::erase_if(forward, has_id);
  std::erase_if(backward, has_id);
  std::erase_if(backward_pre, has_id);
}

int ModuleHooks::next_id() {
  static std::atomic<int> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

/// The global hooks, registered from any thread; a call copies them under the lock.
struct GlobalHooks {
  std::mutex mutex;
  ModuleHooks hooks;
};
GlobalHooks& global_hooks() {
  static GlobalHooks g;
  return g;
}

template <class Hook>
RemovableHandle add_global(std::vector<ModuleHooks::Entry<Hook>> ModuleHooks::*list, Hook hook,
                           bool always_call = false) {
  GlobalHooks& g = global_hooks();
  std::lock_guard<std::mutex> lock(g.mutex);
  const int id = ModuleHooks::add(g.hooks.*list, std::move(hook), /*prepend=*/false, always_call);
  kiln::detail::g_global_module_hooks.store(true, std::memory_order_relaxed);
  return RemovableHandle([id] {
    GlobalHooks& g = global_hooks();
    std::lock_guard<std::mutex> lock(g.mutex);
    g.hooks.remove(id);
    kiln::detail::g_global_module_hooks.store(!g.hooks.empty(), std::memory_order_relaxed);
  });
}

/// `first` then `second`: the global hooks of a kind run before the module's own (PyTorch's
/// `(*_global_forward_hooks.items(), *self._forward_hooks.items())`).
template <class List>
void append(List& first, const List& second) {
  first.insert(first.end(), second.begin(), second.end());
}

}  // namespace

void Module::note_no_hooks() const {
  capture::depends_on(&hooks_, [alive = std::weak_ptr<const bool>(training_), self = this] {
    return alive.lock() != nullptr && (self->hooks_ == nullptr || self->hooks_->empty()) &&
           !kiln::detail::global_module_hooks_registered();
  });
}

TensorList Module::call_with_hooks(TensorList args, const std::function<TensorList(const TensorList&)>& forward_fn) {
  // Copies: a hook may remove itself (or register another) while the lists are walked, and the
  // backward side keeps the hooks of this call (Note [Full backward hooks]).
  ModuleHooks hooks = kiln::detail::global_module_hooks_registered() ? kiln::detail::global_module_hooks() : ModuleHooks{};
  const std::size_t n_global_forward = hooks.forward.size();
  if (hooks_) {
    append(hooks.forward_pre, hooks_->forward_pre);
    append(hooks.forward, hooks_->forward);
    append(hooks.backward, hooks_->backward);
    append(hooks.backward_pre, hooks_->backward_pre);
    // Every hook was removed: the next call takes the branch-free path again.
    if (hooks_->empty()) hooks_.reset();
  }
  if (hooks.empty()) return forward_fn(args);
  // A hook is host code the kernel list of a compiled step cannot replay.
  capture::not_replayable("a module hook (" + type_name() + ")");

  TensorList output;
  std::vector<int> always_called;  // always_call hooks that ran before an exception
  try {
    for (const auto& entry : hooks.forward_pre) {
      if (std::optional<TensorList> replaced = entry.fn(*this, args)) args = std::move(*replaced);
    }
    std::shared_ptr<BackwardHook> backward_hook;
    if (!hooks.backward.empty() || !hooks.backward_pre.empty()) {
      std::vector<FullBackwardHook> fns;
      std::vector<FullBackwardPreHook> pre_fns;
      for (const auto& entry : hooks.backward) fns.push_back(entry.fn);
      for (const auto& entry : hooks.backward_pre) pre_fns.push_back(entry.fn);
      backward_hook = std::make_shared<BackwardHook>(*this, std::move(fns), std::move(pre_fns));
      args = backward_hook->setup_input_hook(std::move(args));
    }
    output = forward_fn(args);
    for (const auto& entry : hooks.forward) {
      if (entry.always_call) always_called.push_back(entry.id);
      std::optional<TensorList> replaced = entry.fn(*this, args, output);
      if (!replaced) continue;
      KILN_CHECK(replaced->size() == output.size(), "forward hook of ", type_name(), " returned ", replaced->size(),
                 " tensors, but its forward returns ", output.size());
      output = std::move(*replaced);
    }
    if (backward_hook) output = backward_hook->setup_output_hook(std::move(output));
    return output;
  } catch (...) {
    // PyTorch's _call_impl: the always_call forward hooks that have not run, run now with the
    // output so far; what they throw is a warning, and the first exception goes on.
    for (std::size_t i = 0; i < hooks.forward.size(); ++i) {
      const auto& entry = hooks.forward[i];
      if (!entry.always_call || std::ranges::find(always_called, entry.id) != always_called.end()) continue;
      try {
        if (std::optional<TensorList> replaced = entry.fn(*this, args, output)) output = std::move(*replaced);
      } catch (const std::exception& e) {
        warn(std::string(i < n_global_forward ? "global module" : "module") +
             " forward hook with ``always_call=True`` raised an exception that was silenced as another error was "
             "raised in forward: " + e.what());
      }
    }
    throw;
  }
}

}  // namespace kiln::nn

namespace kiln::detail {

nn::ModuleHooks global_module_hooks() {
  nn::GlobalHooks& g = nn::global_hooks();
  std::lock_guard<std::mutex> lock(g.mutex);
  return g.hooks;
}

nn::RemovableHandle add_global_forward_pre_hook(nn::ForwardPreHook hook) {
  return nn::add_global(&nn::ModuleHooks::forward_pre, std::move(hook));
}
nn::RemovableHandle add_global_forward_hook(nn::ForwardHook hook, bool always_call) {
  return nn::add_global(&nn::ModuleHooks::forward, std::move(hook), always_call);
}
nn::RemovableHandle add_global_backward_hook(nn::FullBackwardHook hook) {
  return nn::add_global(&nn::ModuleHooks::backward, std::move(hook));
}
nn::RemovableHandle add_global_backward_pre_hook(nn::FullBackwardPreHook hook) {
  return nn::add_global(&nn::ModuleHooks::backward_pre, std::move(hook));
}

}  // namespace kiln::detail
