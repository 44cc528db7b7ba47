// autograd/saved_tensors_hooks.cpp — the guard's push (its pop is ScopedValue's restore).
#include "autograd/saved_tensors_hooks.h"

#include <utility>

namespace kiln::autograd {

SavedTensorsHooksGuard::SavedTensorsHooksGuard(SavedTensorsHooks hooks)
    : hooks_(detail::t_saved_tensors_hooks, std::make_shared<const SavedTensorsHooks>(std::move(hooks))) {}

}  // namespace kiln::autograd
