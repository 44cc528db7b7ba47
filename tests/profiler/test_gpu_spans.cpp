// tests/profiler/test_gpu_spans.cpp — the GPU path of the recorder (Note [GPU spans]) on a
// machine without a GPU: a fake stream clock stands in for CUDA events, and the test plays the
// autograd layer, reporting ops through the public hooks with the CUDA route, as kernels_for
// does before a launch. Each op's GPU span must be the device time between its markers, on its
// stream's lane, linked to the op by "External id". With a GPU, a real CUDA mm is profiled too.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/cuda/cuda.h"
#include "core/profiler_hooks.h"
#include "profiler/profiler.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using profiler::Event;
using profiler::EventKind;
using profiler::kStreamLaneBase;

/// Device time in ms, advanced by the test as kernels "run"; each marker holds the time its
/// stream had reached when it was recorded.
class FakeStreamClock final : public profiler::StreamClock {
 public:
  struct Marker final : profiler::StreamMarker {
    std::uint64_t on;
    double at_ms;
    Marker(std::uint64_t s, double t) : on(s), at_ms(t) {}
    std::uint64_t stream() const override { return on; }
    double elapsed_ms_since(const StreamMarker& start) const override {
      return at_ms - static_cast<const Marker&>(start).at_ms;
    }
  };
  std::unique_ptr<profiler::StreamMarker> record() override { return std::make_unique<Marker>(stream, device_ms[stream]); }
  void run_kernel(double ms) { device_ms[stream] += ms; }

  std::uint64_t stream = 7;
  std::map<std::uint64_t, double> device_ms;
};

/// One op as the autograd layer reports it, whose kernel runs `ms` on the fake device.
void fake_cuda_op(FakeStreamClock& clock, const char* node_name, double ms) {
  profiler::Observer* o = profiler::observer();
  ASSERT_NE(o, nullptr);
  o->op_begin(node_name, {});
  profiler::note_route(profiler::Route::Cuda);  // kernels_for, before the launch
  clock.run_kernel(ms);
  o->op_end(-1);
}

std::int64_t int_arg(const Event& e, const std::string& key) {
  for (const profiler::SpanArg& a : e.args) {
    if (a.key == key) return std::get<std::int64_t>(a.value);
  }
  ADD_FAILURE() << e.name << " has no arg " << key;
  return -1;
}

TEST(ProfilerGpuSpans, EachOpsDeviceTimeOnItsStreamsLane) {
  FakeStreamClock clock;
  clock.device_ms[7] = 100.0;  // the device's clock has its own origin
  profiler::Profile prof({.stream_clock = &clock});
  fake_cuda_op(clock, "MmBackward0", 2.5);
  clock.run_kernel(0.5);  // someone else's work on the stream: a gap of 0.5 ms
  fake_cuda_op(clock, "ToCopyBackward0", 1.0);
  clock.stream = 9;  // another stream: another lane
  fake_cuda_op(clock, "AddBackward0", 4.0);
  prof.stop();

  std::vector<const Event*> ops, gpu;
  for (const Event& e : prof.events()) (e.on_profiled_thread ? ops : gpu).push_back(&e);
  ASSERT_EQ(ops.size(), 3u);
  ASSERT_EQ(gpu.size(), 3u);
  EXPECT_EQ(gpu[0]->name, "aten::mm");
  EXPECT_EQ(gpu[0]->kind, EventKind::Kernel);
  EXPECT_EQ(gpu[1]->name, "aten::to_copy");
  EXPECT_EQ(gpu[1]->kind, EventKind::Memcpy);
  EXPECT_EQ(gpu[2]->kind, EventKind::Kernel);
  // Durations are the device's; on one stream the second starts 2.5 + 0.5 ms after the first.
  EXPECT_EQ(gpu[0]->duration_ns(), 2'500'000);
  EXPECT_EQ(gpu[1]->duration_ns(), 1'000'000);
  EXPECT_EQ(gpu[2]->duration_ns(), 4'000'000);
  EXPECT_EQ(gpu[1]->start_ns - gpu[0]->start_ns, 3'000'000);
  // Each stream's first span starts when its first marker was queued (after its op began).
  EXPECT_GE(gpu[0]->start_ns, ops[0]->start_ns);
  EXPECT_LE(gpu[0]->start_ns, ops[0]->end_ns);
  EXPECT_GE(gpu[2]->start_ns, ops[2]->start_ns);
  EXPECT_EQ(gpu[0]->tid, kStreamLaneBase + 0);
  EXPECT_EQ(gpu[1]->tid, kStreamLaneBase + 0);
  EXPECT_EQ(gpu[2]->tid, kStreamLaneBase + 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(int_arg(*gpu[i], "External id"), int_arg(*ops[i], "External id"));

  // In the trace: PyTorch's categories, one named lane per stream.
  const auto path = std::filesystem::temp_directory_path() / "kiln_profiler_gpu_spans.json";
  prof.export_chrome_trace(path.string());
  std::map<std::string, std::string> category_of;
  std::map<std::int64_t, std::string> lane_names;
  const nlohmann::json trace = nlohmann::json::parse(testing::read_text(path));
  for (const auto& ev : trace.at("traceEvents")) {
    if (ev.at("ph") == "M" && ev.at("name") == "thread_name") lane_names[ev.at("tid")] = ev.at("args").at("name");
    if (ev.at("ph") == "X" && ev.at("tid").get<std::int64_t>() >= kStreamLaneBase) category_of[ev.at("name")] = ev.at("cat");
  }
  EXPECT_EQ(category_of["aten::mm"], "kernel");
  EXPECT_EQ(category_of["aten::to_copy"], "gpu_memcpy");
  EXPECT_EQ(lane_names[kStreamLaneBase + 0], "stream 0");
  EXPECT_EQ(lane_names[kStreamLaneBase + 1], "stream 1");
}

TEST(ProfilerGpuSpans, CpuOpsHaveNoGpuSpan) {
  FakeStreamClock clock;
  profiler::Profile prof({.stream_clock = &clock});
  Tensor a = ones({4, 4});
  Tensor b = a.mm(a);
  prof.stop();
  for (const Event& e : prof.events()) EXPECT_TRUE(e.on_profiled_thread) << e.name;
}

// The same path with CUDA events, where a GPU is lent.
TEST(ProfilerGpuSpans, RealCudaKernelIsTimedOnItsStream) {
  if (!cuda::is_available()) GTEST_SKIP() << "CUDA not available";
  Tensor a = ones({1024, 1024}).to(Device(DeviceType::CUDA, 0));
  a.mm(a);  // warm-up: cuBLAS's handle
  cuda::synchronize();
  profiler::Profile prof;
  Tensor b = a.mm(a);
  prof.stop();
  int kernels = 0;
  for (const Event& e : prof.events()) {
    if (e.kind != EventKind::Kernel) continue;
    ++kernels;
    EXPECT_EQ(e.name, "aten::mm");
    EXPECT_GT(e.duration_ns(), 0);
    EXPECT_GE(e.tid, kStreamLaneBase);
  }
  EXPECT_EQ(kernels, 1);
}

}  // namespace
}  // namespace kiln
