// tests/profiler/test_profiler.cpp — kiln::profiler against the eager run it watches: the trace
// of an MLP step and of a CNN step parses as Trace Event JSON (nlohmann-json), names every
// backward node of the step's graph once and links each to the op that built it, and its
// memory counter peaks where cpu_allocator_stats() says the step peaked; the table's self
// times add up to the step's wall time; nothing is heard when no profiler is active.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "../../examples/support/models.h"
#include "autograd/accumulate_grad.h"
#include "memory/plan.h"
#include "profiler/profiled_models.h"
#include "profiler/profiler.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiled::TinyCnn;
using profiled::TinyMlp;
using profiled::train_step;

/// The names of the nodes of loss's backward graph, AccumulateGrad included, each node once.
std::multiset<std::string> graph_node_names(const Tensor& loss) {
  std::multiset<std::string> names;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> todo = {loss.grad_fn().get()};
  while (!todo.empty()) {
    const autograd::Node* n = todo.back();
    todo.pop_back();
    if (n == nullptr || !seen.insert(n).second) continue;
    names.insert(n->name());
    for (const autograd::Edge& e : n->next_edges()) todo.push_back(e.function.get());
  }
  return names;
}

/// Whether event i lies inside event `ancestor` (its parent chain reaches it).
bool inside(const std::vector<Event>& events, int i, int ancestor) {
  for (int p = events[static_cast<std::size_t>(i)].parent; p >= 0; p = events[static_cast<std::size_t>(p)].parent) {
    if (p == ancestor) return true;
  }
  return false;
}

struct StepRecord {
  std::multiset<std::string> graph;  // the step's backward graph
  std::int64_t peak = 0;             // cpu_allocator_stats() peak of the step
};

/// Profiles `steps` steps of `model` (after one warm-up step), each inside "ProfilerStep#k",
/// and checks the trace and the events against the graph and the allocator's own figures.
void check_profiled_steps(nn::Module& model, const Tensor& x, const Tensor& y, int steps) {
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  train_step(model, sgd, x, y);  // warm-up: momentum buffers, oneDNN primitives
  std::vector<StepRecord> records;
  profiler::Profile prof({.record_shapes = true, .profile_memory = true, .with_stack = false});
  for (int k = 0; k < steps; ++k) {
    cpu_reset_peak_stats();
    StepRecord r;
    {
      profiler::RecordFunction mark("ProfilerStep#" + std::to_string(k));
      r.graph = graph_node_names(train_step(model, sgd, x, y));
    }
    r.peak = cpu_allocator_stats().peak_allocated_bytes;
    records.push_back(std::move(r));
  }
  prof.stop();
  const std::vector<Event>& events = prof.events();

  // --- the events, step by step --------------------------------------------------------------
  std::vector<int> step_events;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == EventKind::Region && events[i].name.rfind("ProfilerStep#", 0) == 0) {
      step_events.push_back(static_cast<int>(i));
    }
  }
  ASSERT_EQ(step_events.size(), static_cast<std::size_t>(steps));
  for (int k = 0; k < steps; ++k) {
    const int step = step_events[static_cast<std::size_t>(k)];
    std::multiset<std::string> nodes_run;
    std::map<int, int> links;  // forward op -> how many nodes name it
    int ops_with_node = 0, optimizer_regions = 0;
    for (int i = 0; i < static_cast<int>(events.size()); ++i) {
      if (!inside(events, i, step)) continue;
      const Event& e = events[static_cast<std::size_t>(i)];
      if (e.kind == EventKind::Op && e.sequence_nr >= 0) ++ops_with_node;
      if (e.kind == EventKind::Region && e.name == "optimizer.step") ++optimizer_regions;
      if (e.kind != EventKind::BackwardNode) continue;
      nodes_run.insert(e.name);
      if (e.name == "AccumulateGrad") {
        EXPECT_EQ(e.sequence_nr, -1);
        continue;
      }
      // Each node links to an op of the same step that built it, with its sequence number.
      ASSERT_GE(e.forward_op, 0) << e.name;
      const Event& op = events[static_cast<std::size_t>(e.forward_op)];
      EXPECT_EQ(op.kind, EventKind::Op);
      EXPECT_EQ(op.sequence_nr, e.sequence_nr);
      EXPECT_TRUE(inside(events, e.forward_op, step)) << e.name;
      EXPECT_LT(op.end_ns, e.start_ns) << "the forward op ends before its backward node runs";
      ++links[e.forward_op];
    }
    // Every node of the step's graph ran exactly once, and nothing else did.
    EXPECT_EQ(nodes_run, records[static_cast<std::size_t>(k)].graph) << "step " << k;
    EXPECT_EQ(static_cast<int>(links.size()), ops_with_node) << "every op that built a node is linked once";
    for (const auto& [op, n] : links) EXPECT_EQ(n, 1);
    EXPECT_EQ(optimizer_regions, 1);
  }

  // Self times partition the recorded time: their sum is the sum of the top-level spans.
  std::int64_t self_sum = 0, top_sum = 0;
  for (const Event& e : events) {
    EXPECT_GE(e.self_ns, 0) << e.name;
    EXPECT_LE(e.self_ns, e.duration_ns()) << e.name;
    self_sum += e.self_ns;
    if (e.parent < 0) top_sum += e.duration_ns();
  }
  EXPECT_EQ(self_sum, top_sum);

  // --- the trace, read back with a real JSON parser -----------------------------------------
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "kiln_profiler_trace.json";
  prof.export_chrome_trace(path.string());
  std::ifstream file(path);
  const nlohmann::json doc = nlohmann::json::parse(file);
  std::filesystem::remove(path);
  ASSERT_TRUE(doc.contains("traceEvents"));
  const nlohmann::json& trace = doc["traceEvents"];
  ASSERT_TRUE(trace.is_array());
  std::size_t complete = 0;
  std::map<std::int64_t, std::string> op_of_seq, node_of_seq;
  std::map<std::int64_t, double> flow_start, flow_end;
  std::vector<std::pair<double, std::int64_t>> counter;  // (ts, allocated)
  std::vector<std::pair<double, double>> step_spans;
  for (const nlohmann::json& ev : trace) {
    const std::string ph = ev.at("ph");
    if (ph == "X") {
      ++complete;
      EXPECT_GE(ev.at("dur").get<double>(), 0.0);
      EXPECT_TRUE(ev.at("ts").is_number());
      EXPECT_TRUE(ev.at("pid").is_number_integer());
      EXPECT_TRUE(ev.at("tid").is_number_integer());
      const std::string cat = ev.at("cat");
      const nlohmann::json& args = ev.at("args");
      if (cat == "cpu_op") {
        EXPECT_EQ(ev.at("name").get<std::string>().rfind("aten::", 0), 0u);
        EXPECT_TRUE(args.at("Input Dims").is_array());
        EXPECT_EQ(args.at("Input Dims").size(), args.at("Input type").size());
        if (args.contains("Sequence number")) op_of_seq[args["Sequence number"]] = ev["name"];
      } else if (cat == "backward_node" && args.contains("Sequence number")) {
        EXPECT_TRUE(node_of_seq.emplace(args["Sequence number"], ev["name"]).second) << "a node ran twice";
      } else if (cat == "user_annotation" && ev["name"].get<std::string>().rfind("ProfilerStep#", 0) == 0) {
        step_spans.emplace_back(ev["ts"].get<double>(), ev["ts"].get<double>() + ev["dur"].get<double>());
      }
    } else if (ph == "s") {
      EXPECT_TRUE(flow_start.emplace(ev.at("id"), ev.at("ts")).second);
    } else if (ph == "f") {
      EXPECT_EQ(ev.at("bp"), "e");
      EXPECT_TRUE(flow_end.emplace(ev.at("id"), ev.at("ts")).second);
    } else if (ph == "C") {
      counter.emplace_back(ev.at("ts").get<double>(), ev.at("args").at("Allocated").get<std::int64_t>());
    }
  }
  EXPECT_EQ(complete, events.size());
  // Every backward node has an arrow from its op: same ids on both ends, the op's first.
  ASSERT_FALSE(node_of_seq.empty());
  EXPECT_EQ(flow_start.size(), node_of_seq.size());
  EXPECT_EQ(flow_end.size(), node_of_seq.size());
  for (const auto& [seq, node] : node_of_seq) {
    ASSERT_TRUE(op_of_seq.count(seq)) << node << " has no forward op";
    ASSERT_TRUE(flow_start.count(seq) && flow_end.count(seq)) << node;
    EXPECT_LT(flow_start[seq], flow_end[seq]);
  }
  // The memory counter's peak inside each step is the allocator's own peak for that step.
  ASSERT_EQ(step_spans.size(), static_cast<std::size_t>(steps));
  for (int k = 0; k < steps; ++k) {
    std::int64_t peak = 0;
    for (const auto& [ts, bytes] : counter) {
      if (ts >= step_spans[static_cast<std::size_t>(k)].first && ts <= step_spans[static_cast<std::size_t>(k)].second) {
        peak = std::max(peak, bytes);
      }
    }
    EXPECT_EQ(peak, records[static_cast<std::size_t>(k)].peak) << "step " << k;
  }
}

TEST(Profiler, MlpStepTraceNamesLinksAndMemory) {
  manual_seed(0);
  TinyMlp model;
  check_profiled_steps(model, rand({16, 64}), randint(0, 10, {16}), 2);
}

TEST(Profiler, CnnStepTraceNamesLinksAndMemory) {
  manual_seed(0);
  TinyCnn model;
  check_profiled_steps(model, rand({8, 1, 28, 28}), randint(0, 10, {8}), 2);
}

// The table's self times add up to the time the steps took, measured outside the profiler:
// each step runs inside a RecordFunction, so every nanosecond of it is some event's self time.
TEST(Profiler, TableSelfTimeMatchesWallTime) {
  manual_seed(0);
  TinyCnn model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01));
  const Tensor x = rand({8, 1, 28, 28}), y = randint(0, 10, {8});
  train_step(model, sgd, x, y);
  profiler::Profile prof({.record_shapes = true, .profile_memory = true});
  std::int64_t wall_ns = 0;
  for (int k = 0; k < 3; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    {
      profiler::RecordFunction mark("ProfilerStep#" + std::to_string(k));
      train_step(model, sgd, x, y);
    }
    wall_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  }
  prof.stop();
  const profiler::EventList averages = prof.key_averages();
  const double self_total = static_cast<double>(averages.self_cpu_time_total_ns());
  std::printf("self CPU time total %.3f ms of %.3f ms wall (%.3f%%)\n", self_total / 1e6,
              static_cast<double>(wall_ns) / 1e6, 100.0 * self_total / static_cast<double>(wall_ns));
  EXPECT_LE(self_total, static_cast<double>(wall_ns));
  EXPECT_GT(self_total, 0.95 * static_cast<double>(wall_ns)) << self_total << " ns of " << wall_ns;

  const std::string table = averages.table({.sort_by = "self_cpu_time_total", .row_limit = 5});
  for (const char* column : {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "CPU Mem",
                             "Self CPU Mem", "# of Calls"}) {
    EXPECT_NE(table.find(column), std::string::npos) << column << "\n" << table;
  }
  EXPECT_EQ(table.find("Input Shapes"), std::string::npos);
  EXPECT_NE(table.find("Self CPU time total: "), std::string::npos);
  // 3 dashed lines + header + 5 rows + the total.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 10) << table;
  // Sorted by self time: the rows' self times never increase.
  std::vector<profiler::FunctionEventAvg> rows = averages.rows();
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.self_cpu_time_total_ns > b.self_cpu_time_total_ns; });
  const std::string first_row = table.substr(table.find('\n', table.find("# of Calls")) + 1);
  EXPECT_NE(first_row.substr(first_row.find('\n') + 1).find(rows[0].key), std::string::npos) << table;
  EXPECT_THROW(averages.table({.sort_by = "cuda_time_total"}), ValueError);
}

TEST(Profiler, GroupByInputShapeSplitsRows) {
  const Tensor a = rand({4, 3}, TensorOptions().requires_grad(true));
  const Tensor b = rand({3, 5}), c = rand({5, 2});
  profiler::Profile prof({.record_shapes = true});
  Tensor ab = a.matmul(b);
  Tensor abc = ab.matmul(c);
  prof.stop();
  std::map<std::string, std::int64_t> by_name, by_shape;
  const profiler::EventList by_names = prof.key_averages(), by_shapes = prof.key_averages(true);
  for (const auto& r : by_names.rows()) by_name[r.key] = r.count;
  for (const auto& r : by_shapes.rows()) by_shape[r.key + " " + r.input_shapes] += r.count;
  // Both products are one op name; grouped by shape they are two rows, with their shapes.
  std::int64_t matmuls = 0;
  for (const auto& [key, n] : by_shape) {
    if (key.find("[[4, 3], [3, 5]]") != std::string::npos || key.find("[[4, 5], [5, 2]]") != std::string::npos) {
      matmuls += n;
    }
  }
  EXPECT_EQ(matmuls, 2) << prof.key_averages(true).table();
  const std::string table = prof.key_averages(true).table();
  EXPECT_NE(table.find("Input Shapes"), std::string::npos);
  EXPECT_EQ(table.find("CPU Mem"), std::string::npos) << "no memory columns without profile_memory";
}

// An op's own allocation is its Self CPU Mem: a [1000] Float32 add allocates one block of the
// size class of 4000 bytes, and keeps it (the result is alive).
// The trace's memory counter is the allocator's curve, and memory::plan predicts that curve's
// peak before anything runs: two steps of train_cnn's model, traced from before the model
// existed (as memory::plan counts), peak exactly where the plan said.
TEST(Profiler, TracedPeakIsMemoryPlansPrediction) {
  const memory::TensorSpec input{{64, 1, 28, 28}};
  const memory::OptimizerFactory sgd = [](const TensorList& p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.01).momentum(0.9));
  };
  set_num_threads(get_num_threads());  // a fixed thread count: oneDNN's scratch depends on it
  memory::MemoryPlan plan;
  {
    examples::Cnn model;
    plan = memory::plan(model, input, {{64}, kInt64}, sgd);
  }
  const std::int64_t before = cpu_allocator_stats().allocated_bytes;
  std::int64_t traced_peak = 0;
  {
    examples::Cnn model;
    auto optimizer = sgd(model.parameters());
    const Tensor x = randn(input.sizes), y = randint(0, 10, {64});
    cpu_empty_cache();
    profiler::Profile prof({.profile_memory = true});
    for (int step = 0; step < 2; ++step) {
      // The loss lives to the step's end, as in the step memory::plan runs: a program that
      // drops it after backward() peaks 2,560 bytes higher here, and the plan is of a program.
      Tensor loss = cross_entropy(model.forward(x), y);
      loss.backward();
      optimizer->step();
      optimizer->zero_grad();
    }
    prof.stop();
    for (const profiler::MemorySample& m : prof.memory_samples()) traced_peak = std::max(traced_peak, m.allocated_bytes);
  }
  EXPECT_EQ(traced_peak - before, plan.peak_allocated) << plan.summary();
}

TEST(Profiler, OpMemoryIsTheAllocatorsBlock) {
  const Tensor a = rand({1000}, TensorOptions().requires_grad(true)), b = rand({1000});
  profiler::Profile prof({.profile_memory = true});
  Tensor c = a + b;
  prof.stop();
  const Event* add = nullptr;
  for (const Event& e : prof.events()) {
    if (e.name == "aten::add") add = &e;
  }
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->self_cpu_memory_usage, static_cast<std::int64_t>(cpu_allocation_size(4000)));
  EXPECT_EQ(add->cpu_memory_usage, add->self_cpu_memory_usage);
  EXPECT_TRUE(add->input_shapes.empty()) << "shapes only with record_shapes";
  EXPECT_GE(add->sequence_nr, 0);
  EXPECT_EQ(add->sequence_nr, static_cast<std::int64_t>(c.grad_fn()->sequence_nr()));
}

// Each op names where its kernels ran: the thin kernels for the one-channel convolution and
// oneDNN for the wider one (in a build with oneDNN; without it the convolutions are composites),
// nothing for a view, only Eigen with the library route turned off; a backward node carries
// its kernels' routes.
TEST(Profiler, EachOpNamesTheRouteItsKernelsTook) {
  manual_seed(0);
  TinyCnn model;
  const Tensor x = randn({4, 1, 28, 28});
  struct Routes {
    std::vector<std::string> convolutions, convolution_nodes;
    std::string view = "(not recorded)";
  };
  auto routes_of_a_step = [&] {
    profiler::Profile prof;
    const Tensor out = model.forward(x);
    out.view({-1}).sum().backward();
    prof.stop();
    Routes r;
    for (const Event& e : prof.events()) {
      if (e.name == "aten::convolution") r.convolutions.push_back(e.route);
      if (e.name == "ConvolutionBackward0") r.convolution_nodes.push_back(e.route);
      if (e.name == "aten::view") r.view = e.route;
    }
    return r;
  };
  const Routes library = routes_of_a_step();
  if (backends::onednn_is_available()) {
    EXPECT_EQ(library.convolutions, (std::vector<std::string>{"thin", "oneDNN"}));
    ASSERT_EQ(library.convolution_nodes.size(), 2u);
    // The engine runs conv2's node first: oneDNN's input gradient; conv1's only the thin weight's.
    EXPECT_NE(library.convolution_nodes[0].find("oneDNN"), std::string::npos) << library.convolution_nodes[0];
    EXPECT_EQ(library.convolution_nodes[1], "thin");
  } else {
    // Without oneDNN the convolution's default is its composite (core/backends.h): no
    // convolution op or node at all, only unfold and a matrix product on Eigen.
    EXPECT_TRUE(library.convolutions.empty());
    EXPECT_TRUE(library.convolution_nodes.empty());
  }
  EXPECT_EQ(library.view, "");
  // With the library route off, a convolution is the composite of unfold and a matrix product:
  // every kernel of the step is the CPU table's own.
  backends::OpKernelsGuard reference(DeviceType::CPU, false);
  profiler::Profile prof;
  model.forward(x).sum().backward();
  prof.stop();
  std::set<std::string> routes;
  for (const Event& e : prof.events()) routes.insert(e.route);
  EXPECT_TRUE(routes.contains("Eigen"));
  routes.erase("Eigen");
  routes.erase("");
  EXPECT_TRUE(routes.empty()) << *routes.begin();
}

/// Counts what it hears.
struct CountingObserver final : profiler::Observer {
  int calls = 0;
  void op_begin(const char*, std::span<const Tensor* const>) override { ++calls; }
  void op_end(std::int64_t) override { ++calls; }
  void node_begin(const char*, std::uint64_t) override { ++calls; }
  void node_end() override { ++calls; }
  void region_begin(const char*) override { ++calls; }
  void region_end() override { ++calls; }
  void span_begin(const char*, profiler::SpanKind, profiler::SpanArgs) override { ++calls; }
};

// With no profiler on a thread, nothing on it is heard: not by a profile that has stopped, not
// by an observer installed on another thread; installed here, the same step is heard.
TEST(Profiler, NothingRecordedWithoutAnActiveProfiler) {
  manual_seed(0);
  TinyMlp model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01));
  const Tensor x = rand({4, 64}), y = randint(0, 10, {4});
  profiler::Profile prof({.record_shapes = true, .profile_memory = true});
  train_step(model, sgd, x, y);
  prof.stop();
  const std::size_t events = prof.events().size(), samples = prof.memory_samples().size();
  EXPECT_GT(events, 0u);
  EXPECT_GT(samples, 0u);
  EXPECT_EQ(profiler::observer(), nullptr);
  EXPECT_EQ(profiler::memory_observer(), nullptr);

  CountingObserver elsewhere;
  std::thread other([&] {
    profiler::set_observer(&elsewhere);
    train_step(model, sgd, rand({4, 64}), y);
    profiler::set_observer(nullptr);
  });
  other.join();
  const int heard_on_its_thread = elsewhere.calls;
  train_step(model, sgd, x, y);
  EXPECT_EQ(elsewhere.calls, heard_on_its_thread) << "an observer hears only its own thread";
  EXPECT_GT(heard_on_its_thread, 0);
  EXPECT_EQ(prof.events().size(), events);
  EXPECT_EQ(prof.memory_samples().size(), samples);
}

TEST(Profiler, OneProfileAtATimeAndResultsAfterStop) {
  profiler::Profile prof;
  EXPECT_THROW(profiler::Profile second, Error);
  EXPECT_THROW(prof.events(), Error);  // "Profiler didn't finish running"
  prof.stop();
  EXPECT_NO_THROW(prof.events());
}

TEST(Profiler, OpNamesFollowATen) {
  EXPECT_EQ(profiler::op_name_for_node("MmBackward0"), "aten::mm");
  EXPECT_EQ(profiler::op_name_for_node("ConvolutionBackward0"), "aten::convolution");
  EXPECT_EQ(profiler::op_name_for_node("NativeBatchNormBackward0"), "aten::native_batch_norm");
  EXPECT_EQ(profiler::op_name_for_node("MaxPool2DWithIndicesBackward0"), "aten::max_pool2d_with_indices");
  EXPECT_EQ(profiler::op_name_for_node("ThresholdBackwardBackward0"), "aten::threshold_backward");
  EXPECT_EQ(profiler::op_name_for_node("Im2ColBackward0"), "aten::im2col");
  EXPECT_EQ(profiler::op_name_for_node("LogSoftmaxBackward0"), "aten::log_softmax");
  EXPECT_EQ(profiler::op_name_for_node("SumBackward1"), "aten::sum");
}

TEST(Profiler, Formats) {
  EXPECT_EQ(profiler::format_time_us(12.5), "12.500us");
  EXPECT_EQ(profiler::format_time_us(1234.5), "1.234ms");  // %.3f of 1.2345: round-half-even on the binary value
  EXPECT_EQ(profiler::format_time_us(2.5e6), "2.500s");
  EXPECT_EQ(profiler::format_memory(512), "512 b");
  EXPECT_EQ(profiler::format_memory(-1536), "-1.50 Kb");
  EXPECT_EQ(profiler::format_memory(3 << 20), "3.00 Mb");
  EXPECT_EQ(profiler::format_shapes({{128, 784}, {}, {10}}), "[[128, 784], [], [10]]");
}

}  // namespace
}  // namespace kiln
