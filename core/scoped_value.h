// core/scoped_value.h — ScopedValue: sets a variable for a scope and puts its previous value
// back on exit, the one mechanism under Kiln's per-thread mode guards (NoGradGuard,
// MetaStandsForGuard, SavedTensorsHooksGuard, autocast's ExcludeGuard).
// See Note [Guards that restore a value].
//
//   thread_local bool t_tracing = false;
//   {
//     ScopedValue<bool> tracing(t_tracing, true);   // t_tracing is true in here
//   }                                               // and false again here, even on a throw
//
// Read next: core/grad_mode.h (the guards users meet first).
#pragma once

#include <type_traits>
#include <utility>

namespace kiln {

// Note [Guards that restore a value]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Grad mode, what meta tensors stand for, the saved-tensor hooks and autocast's exclusion are
// each one thread-local value that a guard sets for a scope. Nesting works because each guard
// keeps the value it replaced and puts it back when it dies, in reverse order of creation; a
// guard that forgot to, or that could be copied (two restores of one value), would leak its
// setting into code after the scope. ScopedValue is that save-and-restore once, so each guard
// says only which variable it sets and to what. It cannot be copied or moved, like the guards
// (and like PyTorch's c10::AutoGradMode): a guard's lifetime is its scope.

/// Sets `variable` to `value` while alive and restores the value it replaced on destruction.
template <class T>
class ScopedValue {
 public:
  ScopedValue(T& variable, T value) noexcept(std::is_nothrow_move_assignable_v<T> &&
                                             std::is_nothrow_move_constructible_v<T>)
      : variable_(variable), previous_(std::exchange(variable, std::move(value))) {}
  ~ScopedValue() { variable_ = std::move(previous_); }
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  T& variable_;
  T previous_;
};

}  // namespace kiln
