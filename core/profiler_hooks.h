// core/profiler_hooks.h — what a profiler above (profiler/) hears while it records: every
// differentiable op as it enters the pipeline (autograd/function.h), every backward node the
// engine runs (autograd/engine.cpp), the regions an optimizer or a GradScaler marks
// (capture::Region, core/capture_hooks.h), the route each kernel call takes (core/kernels.cpp,
// the oneDNN runtime, the thin convolutions), and every CPU allocation and free. Nothing here
// records: with no profiler active each hook costs one test of a pointer that is null (a
// thread-local one for ops, nodes and regions; a global one for the allocator, whose events
// any thread may cause). See Note [Profiler hook points]. Read next: profiler/profile.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

class Tensor;

namespace profiler {

// Note [Profiler hook points]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The capture (compile/) listens at kernels_for: it needs every kernel a step calls, and an op
// is only a way of reaching kernels. A profiler needs the other view: ops by their public
// names, with their inputs' shapes and the time from entry to return, nested as they call one
// another, and the backward node each one built. No kernel-level hook can give that (an op
// asks for its table once and may call several kernels, or none on the meta device), so the
// profiler listens one level up, where the pipeline starts: Function<Derived>::apply, the
// same entry autocast uses. An op that built a backward node reports the node's sequence
// number at its end; the engine reports the same number when it runs the node: that pair is
// PyTorch's forward-backward flow arrow. Regions reuse capture::Region, which already marks
// the optimizer's step and the GradScaler's decisions for the capture, so neither optim/ nor
// amp/ learns about profiling. The allocator's hook sits beside its counters, so the memory
// the profiler sees is exactly what cpu_allocator_stats() counts.
// The route an op took is heard where it is known for certain, not where it is chosen (a choice
// can still fall back): kernels_for says a raw op is about to call a kernel of the CPU's or the
// CUDA table (Eigen, Kiln's reference route, or CUDA); the oneDNN runtime says a primitive ran;
// the thin convolutions say they ran. The profiler keeps the most specific of them per op.
// Work that is not an op has spans of its own (Span below): a DataLoader worker's batch, a
// collective, a GPU kernel timed by CUDA events. A span on the recording thread nests among its
// ops as a region does; one on any other thread (a worker) is handed over whole when it ends,
// through a process-wide pointer as the allocator's events are, and gets its own lane.

/// Where an op's kernels ran. Eigen is the CPU table's own kernels (Kiln's reference route);
/// oneDNN and Thin are CPU kernels reached through that table that replace it for some shapes.
enum class Route : std::uint8_t { Eigen, Thin, OneDnn, Cuda, kCount };

/// What a Span stands for, which decides its category in the trace.
enum class SpanKind : std::uint8_t {
  Region,      // host code: a DataLoader batch, a wait ("user_annotation")
  Collective,  // a process group's collective ("cpu_op", as PyTorch's c10d:: ops)
  Kernel,      // a GPU kernel, timed on its stream ("kernel")
  Memcpy,      // a copy to, from or on a GPU, timed on its stream ("gpu_memcpy")
};

/// One argument a span shows in the trace's args ("Group size": 2, "dtype": "float").
struct SpanArg {
  std::string key;
  std::variant<std::int64_t, std::string> value;
};
using SpanArgs = std::vector<SpanArg>;

/// Implemented by profiler/profile.cpp. Begins and ends nest on the thread that installed it.
class Observer {
 public:
  virtual ~Observer() = default;
  /// A differentiable op enters the pipeline; `node_name` names the backward node it would
  /// build ("MulBackward0"), `inputs` are its tensor arguments (some may be undefined).
  virtual void op_begin(const char* node_name, std::span<const Tensor* const> inputs) = 0;
  /// The op returns; `sequence_nr` is that of the node it built, or -1 when it built none.
  virtual void op_end(std::int64_t sequence_nr) = 0;
  /// The engine runs a backward node (AccumulateGrad's number is UINT64_MAX: it has no op).
  virtual void node_begin(const char* name, std::uint64_t sequence_nr) = 0;
  virtual void node_end() = 0;
  /// A named region of host code (optimizer.step, GradScaler.update, a user's step).
  virtual void region_begin(const char* name) = 0;
  virtual void region_end() = 0;
  /// A kernel of the innermost open op or node runs on `route`.
  virtual void route(Route) {}
  /// A Span on this thread: a region of `kind` carrying `args`, ended by region_end().
  virtual void span_begin(const char* name, SpanKind kind, SpanArgs args) = 0;
};

/// Hears spans that ended on threads with no Observer (a DataLoader worker, a rank's thread),
/// or on a device's stream (`tid` then names the stream's lane). Any thread may call it.
class SpanObserver {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~SpanObserver() = default;
  virtual void span(std::string name, SpanKind kind, Clock::time_point start, Clock::time_point end,
                    std::int64_t tid, SpanArgs args) = 0;
};

/// Hears the CPU allocator (core/cpu/cpu_allocator.cpp), on whichever thread allocates.
class MemoryObserver {
 public:
  virtual ~MemoryObserver() = default;
  /// `bytes` (positive: allocated, negative: freed, both in size-class bytes) at `ptr`;
  /// `allocated_now` is the allocator's allocated_bytes right after this event.
  virtual void memory_event(const void* ptr, std::int64_t bytes, std::int64_t allocated_now) = 0;
};

namespace detail {
inline thread_local Observer* t_observer = nullptr;
inline std::atomic<MemoryObserver*> g_memory_observer{nullptr};
inline std::atomic<SpanObserver*> g_span_observer{nullptr};
}  // namespace detail

/// This thread's profiler (nullptr when none records here).
inline Observer* observer() { return detail::t_observer; }
/// Installs `o` on this thread and returns the previous one.
inline Observer* set_observer(Observer* o) { return std::exchange(detail::t_observer, o); }

/// The allocator's listener (nullptr when no profiler records memory).
inline MemoryObserver* memory_observer() { return detail::g_memory_observer.load(std::memory_order_acquire); }
/// Installs `o` for every thread and returns the previous one.
inline MemoryObserver* set_memory_observer(MemoryObserver* o) {
  return detail::g_memory_observer.exchange(o, std::memory_order_acq_rel);
}

/// The listener for other threads' spans (nullptr when no profiler records).
inline SpanObserver* span_observer() { return detail::g_span_observer.load(std::memory_order_acquire); }
/// Installs `o` for every thread and returns the previous one.
inline SpanObserver* set_span_observer(SpanObserver* o) {
  return detail::g_span_observer.exchange(o, std::memory_order_acq_rel);
}

/// A GPU span's lane is kStreamLaneBase + its stream's number: apart from every thread's id
/// (Linux's are below 2^22).
inline constexpr std::int64_t kStreamLaneBase = std::int64_t{1} << 32;

/// The kernel's id of the calling thread (gettid()): the lane its spans get in the trace.
std::int64_t current_thread_id();

/// Reports the route a kernel is taking to this thread's profiler, if one records.
inline void note_route(Route r) {
  if (Observer* o = observer()) [[unlikely]] o->route(r);
}

/// An op's span, ended even when the op throws (autograd/function.h makes one per profiled op).
class OpScope {
 public:
  OpScope(Observer* o, const char* node_name, std::span<const Tensor* const> inputs) : observer_(o) {
    observer_->op_begin(node_name, inputs);
  }
  ~OpScope() { observer_->op_end(sequence_nr_); }
  void set_sequence_nr(std::int64_t n) { sequence_nr_ = n; }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Observer* observer_;
  std::int64_t sequence_nr_ = -1;
};

/// A backward node's run, reported by the engine when a profiler is active on its thread.
class NodeScope {
 public:
  NodeScope(const char* name, std::uint64_t sequence_nr) : observer_(observer()) {
    if (observer_ != nullptr) observer_->node_begin(name, sequence_nr);
  }
  ~NodeScope() {
    if (observer_ != nullptr) observer_->node_end();
  }
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

 private:
  Observer* observer_;
};

/// A span of work that is not an op, on whichever thread runs it: nested among the ops when
/// this thread records, handed to the span observer when it ends otherwise, and nothing at all
/// (two pointer tests) when no profiler is active. `make_args` is called only when a profiler
/// records, so building the args costs nothing otherwise; `name` must outlive the span.
///
///   profiler::Span span("c10d::allreduce_", SpanKind::Collective, [&] { return SpanArgs{{"Group size", 2}}; });
class Span {
 public:
  template <class MakeArgs>
  Span(const char* name, SpanKind kind, MakeArgs&& make_args) : local_(observer()) {
    if (local_ != nullptr) [[unlikely]] {
      local_->span_begin(name, kind, make_args());
    } else if (SpanObserver* remote = span_observer()) [[unlikely]] {
      remote_ = remote;
      name_ = name;
      kind_ = kind;
      args_ = make_args();
      start_ = SpanObserver::Clock::now();
    }
  }
  Span(const char* name, SpanKind kind) : Span(name, kind, [] { return SpanArgs{}; }) {}
  ~Span() {
    if (local_ != nullptr) [[unlikely]] {
      if (observer() == local_) local_->region_end();  // not when the profile stopped meanwhile
    } else if (remote_ != nullptr) [[unlikely]] {
      // The observer may have changed since the span began (the profile stopped): ask again.
      if (SpanObserver* now = span_observer()) {
        now->span(name_, kind_, start_, SpanObserver::Clock::now(), current_thread_id(), std::move(args_));
      }
    }
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Observer* local_;
  SpanObserver* remote_ = nullptr;
  const char* name_ = nullptr;
  SpanKind kind_ = SpanKind::Region;
  SpanArgs args_;
  SpanObserver::Clock::time_point start_{};
};

}  // namespace profiler
}  // namespace kiln
