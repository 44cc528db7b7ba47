// core/capture_hooks.h — what a capture layer above (compile/) hears while it records a step:
// every kernel call (it hands raw ops a kernel table of its own, core/kernels.h), every read
// or write of tensor data by host code outside a kernel (Tensor::item, data_ptr), the regions
// that must run as they are at every replay (an optimizer's step, a GradScaler's decision, a
// check that reads data), and the gradients autograd binds to leaves. Nothing here records:
// with no observer installed on the thread, which is always the case outside
// kiln::compile's first call, each hook costs one thread-local test. A replay, in turn, may
// serve kernels' own temporary memory from scratch planned ahead (ScratchSource).
// See Note [Capturing a step] in compile/capture.h. Read next: compile/capture.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <string>
#include <utility>

#include "core/allocator.h"
#include "core/device.h"
#include "core/profiler_hooks.h"

namespace kiln {

class Tensor;
class Storage;
struct BackendKernels;

namespace capture {

/// Implemented by the capture (compile/capture.cpp); see the file header.
class Observer {
 public:
  virtual ~Observer() = default;
  /// The kernel table raw ops use on this thread, or nullptr for the registered one.
  virtual const BackendKernels* kernels(DeviceType type) = 0;
  /// Host code reached `t`'s bytes outside any kernel: `how` ("item", "data_ptr") and where.
  virtual void host_access(const Tensor& t, const char* how, std::source_location where) = 0;
  /// A region begins that replays by calling `replay`; `reads` are the tensors of the step it
  /// reads besides the state it owns. Regions nest; only the outermost one counts.
  virtual void region_begin(const char* name, std::function<void()> replay,
                            std::initializer_list<const Tensor*> reads) = 0;
  virtual void region_end() = 0;
  /// A layer's call begins (`owner` is the layer, `args` its tensor arguments, an undefined
  /// one where an optional argument was not given) or ends (`results`, none when it threw).
  /// A capture notes which of its nodes each call made, as PyTorch's tracer notes module
  /// scopes; nothing replays differently (Note [Layer scopes] in compile/capture.h).
  virtual void scope_begin([[maybe_unused]] const void* owner, [[maybe_unused]] const char* name,
                           [[maybe_unused]] std::initializer_list<const Tensor*> args) {}
  virtual void scope_end([[maybe_unused]] std::initializer_list<const Tensor*> results) {}
  /// Autograd made `grad` the .grad of `leaf` (AccumulateGrad's first gradient).
  virtual void grad_bound(const Tensor& leaf, const Tensor& grad) = 0;
  /// The step set `leaf`'s .grad to none (zero_grad): what the .grad holds later in the step
  /// depends on the step, not on the call (Note [A gradient bound or added to]).
  virtual void grad_unbound([[maybe_unused]] const Tensor& leaf) {}
  /// The step set host state `key` itself (a module's training mode): reads of it later in the
  /// step see the step's own doing, not the caller's state, so they are no conditions.
  virtual void state_set([[maybe_unused]] const void* key) {}
  /// New memory was allocated (an op's output, a gradient): whatever of it outlives the step
  /// outside the graph, the step made and host code kept (Note [Tensors a step reads from
  /// outside] in compile/outside_reads.h).
  virtual void storage_made([[maybe_unused]] const std::shared_ptr<Storage>& storage) {}
  /// Something happened that a replay cannot redo (`what`, at `where`): the step stays eager.
  virtual void not_replayable(const std::string& what, std::source_location where) = 0;
  /// Host state that decides what the step records was read (a module's training mode, that it
  /// has no hooks): `holds()` says whether it still has the value read. `key` identifies the
  /// state, so that reading it again adds nothing.
  virtual void depends_on([[maybe_unused]] const void* key, [[maybe_unused]] std::function<bool()> holds) {}
};

/// Serves the memory kernels take for themselves (reorder buffers, a library's scratchpad)
/// from memory planned ahead, while a captured step replays (compile/scratch.h). The CPU
/// allocator asks it first; an empty DataPtr sends the request on to the allocator.
class ScratchSource {
 public:
  virtual ~ScratchSource() = default;
  virtual DataPtr allocate(std::size_t nbytes) = 0;
};

namespace detail {
inline thread_local Observer* t_observer = nullptr;
inline thread_local ScratchSource* t_scratch = nullptr;
}  // namespace detail

/// This thread's scratch source (nullptr outside a replayed kernel).
inline ScratchSource* scratch_source() { return detail::t_scratch; }
/// Installs `s` on this thread and returns the previous one.
inline ScratchSource* set_scratch_source(ScratchSource* s) { return std::exchange(detail::t_scratch, s); }

/// This thread's observer (nullptr when no capture runs).
inline Observer* observer() { return detail::t_observer; }
/// Installs `o` on this thread and returns the previous one.
Observer* set_observer(Observer* o);

/// Tensor's data accessors call this when an observer is installed.
void host_access(const Tensor& t, const char* how, std::source_location where);
/// State a captured step holds as it was changed outside any capture: Module::to() replaced a
/// parameter or buffer with a new tensor, a leaf's gradient hooks were added or removed.
/// Counted process-wide, so that steps captured before capture again.
void held_state_changed();
std::uint64_t held_state_changes();

/// AccumulateGrad calls this after binding a leaf's first gradient.
inline void grad_bound(const Tensor& leaf, const Tensor& grad) {
  if (Observer* o = observer()) o->grad_bound(leaf, grad);
}

/// zero_grad calls this for each leaf whose .grad it sets to none.
inline void grad_unbound(const Tensor& leaf) {
  if (Observer* o = observer()) o->grad_unbound(leaf);
}

/// Modules' train() calls this, inside a region that sets the mode again at each replay.
inline void state_set(const void* key) {
  if (Observer* o = observer()) o->state_set(key);
}

/// Says that what happens here (a collective, say) cannot be replayed, when a capture runs.
inline void not_replayable(const std::string& what, std::source_location where = std::source_location::current()) {
  if (Observer* o = observer()) o->not_replayable(what, where);
}

/// Says that the step's recording depends on host state read here (Observer::depends_on).
template <class Holds>
void depends_on(const void* key, Holds&& holds) {
  if (Observer* o = observer()) o->depends_on(key, std::forward<Holds>(holds));
}

/// A region that a captured step replays by calling `replay` instead of its kernels: code
/// whose kernels take host numbers that change from step to step (an optimizer's step count and
/// learning rate) or that decides on the host (a GradScaler skipping a step on inf). When no
/// capture runs it does nothing, and `replay` is not even stored. A profiler active on the
/// thread sees it as a region of its timeline too (Note [Profiler hook points]).
///   void Optimizer::step() {
///     capture::Region region("optimizer.step", [this] { step(); });
///     ...
class Region {
 public:
  template <class Replay>
  Region(const char* name, Replay&& replay, std::initializer_list<const Tensor*> reads = {})
      : observer_(observer()), profiler_(profiler::observer()) {
    if (observer_) observer_->region_begin(name, std::function<void()>(std::forward<Replay>(replay)), reads);
    if (profiler_) profiler_->region_begin(name);
  }
  ~Region() {
    if (profiler_) profiler_->region_end();
    if (observer_) observer_->region_end();
  }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

 private:
  Observer* observer_;
  profiler::Observer* profiler_;
};

/// Marks a layer's call for a capture (Observer::scope_begin); costs one thread-local test
/// when none runs.
///   capture::Scope scope(this, "LSTM", {&input, &h0, &c0});
///   ...
///   scope.returns({&output, &h_n, &c_n});
class Scope {
 public:
  Scope(const void* owner, const char* name, std::initializer_list<const Tensor*> args) : observer_(observer()) {
    if (observer_) observer_->scope_begin(owner, name, args);
  }
  /// The call's results, given just before it returns; closes the scope.
  void returns(std::initializer_list<const Tensor*> results) {
    if (observer_) observer_->scope_end(results);
    observer_ = nullptr;
  }
  ~Scope() {
    if (observer_) observer_->scope_end({});
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Observer* observer_;
};

}  // namespace capture
}  // namespace kiln
