// profiler/event.h — what a Profile hands back: one Event per op, backward node or region that
// ran while it recorded, and one MemorySample per CPU allocation or free. Plain data, read by
// the table (profiler/key_averages.h) and the trace (profiler/chrome_trace.h).
// Read next: profiler/profile.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profiler_hooks.h"

#include "core/dtype.h"

namespace kiln::profiler {

enum class EventKind : std::uint8_t {
  Op,            // a differentiable op entering the pipeline ("aten::mm")
  BackwardNode,  // a backward node the engine ran ("MmBackward0")
  Region,        // a named region of host code ("optimizer.step", a RecordFunction, a DataLoader batch)
  Collective,    // a process group's collective ("c10d::allreduce_")
  Kernel,        // a GPU kernel on its stream, timed by CUDA events
  Memcpy,        // a copy to, from or on a GPU, on its stream
};

/// One span of a thread's (or a GPU stream's) timeline. Times are nanoseconds from the
/// profile's start; an event's children are the events that began and ended inside it on the
/// recording thread. Other threads' spans (DataLoader workers, collectives of other ranks'
/// threads) and GPU spans have no parent and no children.
struct Event {
  std::string name;
  EventKind kind = EventKind::Op;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  /// end - start minus the time of the children: PyTorch's "self CPU time".
  std::int64_t self_ns = 0;
  int parent = -1;  // index into Profile::events(), -1 at the top
  int depth = 0;
  /// An op: the sequence number of the backward node it built (-1: none). A backward node:
  /// its own (-1 for AccumulateGrad, which no op built).
  std::int64_t sequence_nr = -1;
  /// A backward node: the index of the op that built it, when that op was recorded (-1: not).
  int forward_op = -1;
  /// CPU allocator bytes allocated minus freed while the event ran on its thread, children
  /// included (PyTorch's "CPU Mem") and not ("Self CPU Mem"). Size-class bytes, as counted by
  /// cpu_allocator_stats().
  std::int64_t cpu_memory_usage = 0;
  std::int64_t self_cpu_memory_usage = 0;
  /// An op or backward node: where its kernels ran, its children's included: "oneDNN",
  /// "thin", "thin+oneDNN", "Eigen" (the CPU's reference route), "CUDA"; "" when none ran
  /// (a view). oneDNN and thin, which replace the CPU table's kernel, hide "Eigen".
  std::string route;
  /// With record_shapes: one entry per tensor argument (an undefined one has no dims).
  std::vector<std::vector<std::int64_t>> input_shapes;
  std::vector<DType> input_dtypes;
  /// With with_stack, an op: the functions of the user's code that called it, innermost first,
  /// Kiln's own frames left out (PyTorch's FunctionEvent.stack).
  std::vector<std::string> stack;
  /// The lane: the kernel's id of the thread it ran on, or a GPU stream's lane.
  std::int64_t tid = 0;
  /// Whether it ran on the thread that recorded the ops (false: a worker, a stream).
  bool on_profiled_thread = true;
  /// What a span carries into the trace beyond the above (a collective's sizes, a batch's number).
  SpanArgs args;

  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

/// One allocator event: `bytes` allocated (positive) or freed (negative) at `ts_ns`, and the
/// allocator's allocated_bytes right after it. Any thread's events are kept; `on_profiled_thread`
/// says whether it happened on the recording thread (and so counts towards an event's memory).
struct MemorySample {
  std::int64_t ts_ns = 0;
  std::int64_t bytes = 0;
  std::int64_t allocated_bytes = 0;
  bool on_profiled_thread = true;
};

}  // namespace kiln::profiler
