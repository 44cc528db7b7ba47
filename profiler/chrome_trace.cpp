// profiler/chrome_trace.cpp — writing the Trace Event JSON (see profiler/chrome_trace.h). Times
// are microseconds from the profile's start, as the format wants; nanoseconds survive as the
// fraction.
#include "profiler/chrome_trace.h"

#include <unistd.h>

#include <map>
#include <variant>

#include <nlohmann/json.hpp>

namespace kiln::profiler {

namespace {

const char* category(EventKind kind) {
  switch (kind) {
    case EventKind::Op: return "cpu_op";
    case EventKind::BackwardNode: return "backward_node";
    case EventKind::Region: return "user_annotation";
    case EventKind::Collective: return "cpu_op";  // PyTorch's c10d:: ops are ops of the dispatcher
    case EventKind::Kernel: return "kernel";
    case EventKind::Memcpy: return "gpu_memcpy";
  }
  return "cpu_op";
}

double us(std::int64_t ns) { return static_cast<double>(ns) / 1e3; }

}  // namespace

std::string chrome_trace_json(const std::vector<Event>& events, const std::vector<MemorySample>& memory,
                              std::int64_t initial_allocated) {
  using nlohmann::json;
  const int pid = static_cast<int>(getpid());
  // One lane per thread (its kernel id) or GPU stream; the allocator's counter is per process.
  json trace = json::array();
  trace.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", "kiln"}}}});
  std::map<std::int64_t, std::string> lanes;
  for (const Event& e : events) {
    if (lanes.contains(e.tid)) continue;
    const bool gpu = e.kind == EventKind::Kernel || e.kind == EventKind::Memcpy;
    lanes[e.tid] = e.on_profiled_thread ? "profiled thread"
                   : gpu               ? "stream " + std::to_string(e.tid - kStreamLaneBase)
                                       : "thread " + std::to_string(e.tid);
  }
  for (const auto& [tid, name] : lanes) {
    trace.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  for (const Event& e : events) {
    json args = json::object();
    if (!e.input_shapes.empty() || e.kind == EventKind::Op) {
      if (!e.input_shapes.empty()) {
        args["Input Dims"] = e.input_shapes;
        json types = json::array();
        for (DType t : e.input_dtypes) types.push_back(scalar_type_name(t));
        args["Input type"] = types;
      }
    }
    if (e.sequence_nr >= 0) args["Sequence number"] = e.sequence_nr;
    if (!e.route.empty()) args["Route"] = e.route;
    if (e.on_profiled_thread) {
      args["CPU Mem"] = e.cpu_memory_usage;
      args["Self CPU Mem"] = e.self_cpu_memory_usage;
    }
    if (!e.stack.empty()) args["Call stack"] = e.stack;  // innermost first, as FunctionEvent.stack
    for (const SpanArg& a : e.args) std::visit([&](const auto& v) { args[a.key] = v; }, a.value);
    trace.push_back({{"ph", "X"},
                     {"cat", category(e.kind)},
                     {"name", e.name},
                     {"pid", pid},
                     {"tid", e.tid},
                     {"ts", us(e.start_ns)},
                     {"dur", us(e.duration_ns())},
                     {"args", std::move(args)}});
  }
  // PyTorch's forward-backward arrows: one flow per backward node whose op was recorded, from
  // the op's start to the node's start, keyed by the node's sequence number.
  for (const Event& node : events) {
    if (node.kind != EventKind::BackwardNode || node.forward_op < 0) continue;
    const Event& op = events[static_cast<std::size_t>(node.forward_op)];
    trace.push_back({{"ph", "s"}, {"cat", "fwdbwd"}, {"name", "fwdbwd"}, {"id", node.sequence_nr},
                     {"pid", pid}, {"tid", op.tid}, {"ts", us(op.start_ns)}});
    trace.push_back({{"ph", "f"}, {"cat", "fwdbwd"}, {"name", "fwdbwd"}, {"id", node.sequence_nr}, {"bp", "e"},
                     {"pid", pid}, {"tid", node.tid}, {"ts", us(node.start_ns)}});
  }
  trace.push_back({{"ph", "C"}, {"name", "CPU Memory"}, {"pid", pid}, {"ts", 0.0},
                   {"args", {{"Allocated", initial_allocated}}}});
  for (const MemorySample& m : memory) {
    trace.push_back({{"ph", "C"}, {"name", "CPU Memory"}, {"pid", pid}, {"ts", us(m.ts_ns)},
                     {"args", {{"Allocated", m.allocated_bytes}}}});
  }
  json doc = {{"traceEvents", std::move(trace)}, {"displayTimeUnit", "ms"}};
  return doc.dump();
}

}  // namespace kiln::profiler
