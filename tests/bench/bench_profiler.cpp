// tests/bench/bench_profiler.cpp — what recording costs: the examples' CNN step (batch 128, SGD
// with momentum, the build's default routes, as BM_CnnStep in bench_training) with no profiler
// beside the same step under a Profile recording shapes and memory. The baseline runs in the
// same binary and, in BM_CnnStepProfilerOverhead, interleaved step by step with the profiled
// one, so a busy machine slows both alike; its counter `ratio` is profiled / plain.
//   KILN_NUM_THREADS=2 build/tests/bench/bench_profiler
// BM_OneElementAddRecorded shows the cost per op. The target: ratio <= 1.10 (with_stack:0;
// with_stack:1 adds each op's backtrace(), Note [Stacks of ops]).
// Read next: profiler/profile.h.
#include <benchmark/benchmark.h>

#include <chrono>
#include <optional>

#include "../../examples/support/models.h"
#include "kiln.h"

namespace kiln {
namespace {

struct CnnStep {
  examples::Cnn cnn;
  optim::SGD sgd{cnn.parameters(), optim::SGDOptions(0.01).momentum(0.9)};
  Tensor x = rand({128, 1, 28, 28});
  Tensor y = randint(0, 10, {128});
  void operator()() {
    sgd.zero_grad();
    Tensor loss = nn::functional::cross_entropy(cnn.forward(x), y);
    loss.backward();
    sgd.step();
  }
};

const profiler::ProfileOptions kRecording{.record_shapes = true, .profile_memory = true};
const profiler::ProfileOptions kRecordingStacks{.record_shapes = true, .profile_memory = true, .with_stack = true};

/// profiled:0 runs the step alone; profiled:1 under one Profile spanning every timed step (its
/// results are built after the timed loop, as a program would after its profiled steps).
void BM_CnnStep(benchmark::State& state) {
  manual_seed(0);
  CnnStep step;
  step();
  step();
  std::optional<profiler::Profile> prof;
  if (state.range(0) == 1) prof.emplace(kRecording);
  for (auto _ : state) step();
  if (prof) {
    prof->stop();
    state.counters["events/step"] =
        static_cast<double>(prof->events().size()) / static_cast<double>(state.iterations());
    state.counters["memory_samples/step"] =
        static_cast<double>(prof->memory_samples().size()) / static_cast<double>(state.iterations());
  }
}
BENCHMARK(BM_CnnStep)->ArgName("profiled")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// Each iteration: one plain step, then one step under a fresh Profile (started and stopped
/// outside the timed span). Reports both means and their ratio; with_stack:1 records stacks too.
void BM_CnnStepProfilerOverhead(benchmark::State& state) {
  const profiler::ProfileOptions& options = state.range(0) == 1 ? kRecordingStacks : kRecording;
  using Clock = std::chrono::steady_clock;
  manual_seed(0);
  CnnStep step;
  step();
  step();
  double plain_s = 0.0, profiled_s = 0.0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    step();
    plain_s += std::chrono::duration<double>(Clock::now() - t0).count();
    profiler::Profile prof(options);
    t0 = Clock::now();
    step();
    profiled_s += std::chrono::duration<double>(Clock::now() - t0).count();
    state.PauseTiming();
    prof.stop();
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plain_ms"] = 1e3 * plain_s / n;
  state.counters["profiled_ms"] = 1e3 * profiled_s / n;
  state.counters["ratio"] = profiled_s / plain_s;
}
BENCHMARK(BM_CnnStepProfilerOverhead)
    ->ArgName("with_stack")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0);

/// What one op costs to record: bench_core's one-element add (a node recorded, as in a
/// forward) with no profiler (profiled:0, bench_core's own figure) and under a Profile
/// recording shapes and memory (profiled:1), and stacks too (profiled:2). Each iteration's
/// events are kept until the end.
void BM_OneElementAddRecorded(benchmark::State& state) {
  Tensor a = ones({1}, requires_grad()), b = ones({1});
  std::optional<profiler::Profile> prof;
  if (state.range(0) == 1) prof.emplace(kRecording);
  if (state.range(0) == 2) prof.emplace(kRecordingStacks);
  for (auto _ : state) benchmark::DoNotOptimize((a + b).raw_data_ptr());
}
BENCHMARK(BM_OneElementAddRecorded)->ArgName("profiled")->Arg(0)->Arg(1)->Arg(2);

}  // namespace
}  // namespace kiln
