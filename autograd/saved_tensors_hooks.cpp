// autograd/saved_tensors_hooks.cpp — the guard's push and pop.
#include "autograd/saved_tensors_hooks.h"

#include <utility>

namespace kiln::autograd {

SavedTensorsHooksGuard::SavedTensorsHooksGuard(SavedTensorsHooks hooks)
    : previous_(std::exchange(detail::t_saved_tensors_hooks,
                              std::make_shared<const SavedTensorsHooks>(std::move(hooks)))) {}

SavedTensorsHooksGuard::~SavedTensorsHooksGuard() { detail::t_saved_tensors_hooks = std::move(previous_); }

}  // namespace kiln::autograd
