// core/grad_mode.h — whether ops record history, per thread.
//
//   {
//     kiln::NoGradGuard no_grad;      // optimizer updates, evaluation
//     w.sub_(w.grad() * lr);          // allowed: nothing is recorded
//   }
//
// Under NoGradGuard every op's output has requires_grad false, and in-place ops are allowed
// on any tensor (that is how optimizers update parameters). EnableGradGuard turns recording
// back on inside a no-grad region. It is core's, below autograd (PyTorch keeps it in
// c10/core/GradMode.h), because layers that record nothing read it too: autocast's cast cache,
// the GradScaler, the capture's guards.
// Read next: autograd/function.h.
#pragma once

#include "core/scoped_value.h"

namespace kiln {

/// True when ops record autograd history on this thread (the default).
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

namespace detail {
/// This thread's grad mode, the one variable is_grad_enabled reads and the guards set.
bool& grad_enabled_flag();
}  // namespace detail

/// Sets the mode to `enabled` for its scope and restores the previous mode on exit (the engine
/// uses it for create_graph). See Note [Guards that restore a value].
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : mode_(detail::grad_enabled_flag(), enabled) {}

 private:
  ScopedValue<bool> mode_;
};

/// Disables recording for its scope and restores the previous mode on exit.
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

/// Enables recording for its scope (inside a NoGradGuard) and restores the mode on exit.
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

}  // namespace kiln
