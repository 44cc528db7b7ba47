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

namespace kiln {

/// True when ops record autograd history on this thread (the default).
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// Disables recording for its scope and restores the previous mode on exit.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

/// Enables recording for its scope (inside a NoGradGuard) and restores the mode on exit.
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

/// Sets the mode to `enabled` for its scope (the engine uses it for create_graph).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln
