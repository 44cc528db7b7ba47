// profiler/chrome_trace.h — a profile as Trace Event JSON (the format chrome://tracing and
// Perfetto open): a complete event ("ph": "X") per op, backward node, region, collective and
// GPU span with its input shapes, call stack and span args, one lane ("tid") per thread or
// stream, a counter ("ph": "C") for the CPU allocator's bytes, and a flow arrow ("ph": "s"
// then "f", keyed by sequence number) from each op to the backward node it built.
// Read next: profiler/profile.h.
#pragma once

#include <string>
#include <vector>

#include "profiler/event.h"

namespace kiln::profiler {

/// The trace as one JSON document. `initial_allocated` starts the memory counter.
std::string chrome_trace_json(const std::vector<Event>& events, const std::vector<MemorySample>& memory,
                              std::int64_t initial_allocated);

}  // namespace kiln::profiler
