// tests/bench/bench_memory_plan.cpp — what planning a step costs beside running it, in one
// binary: memory::plan (two steps on the meta device, replayed through the CPU allocator's
// algorithm) against one real training step of the same model and batch (issue target: a
// plan costs at most 2 real steps of the MLP). Planning does no arithmetic, so its cost must
// not grow with the batch: compare batch:128 with batch:4096.
//   build/tests/bench/bench_memory_plan
#include <benchmark/benchmark.h>

#include "../../examples/support/models.h"
#include "kiln.h"

namespace {

using namespace kiln;

memory::OptimizerFactory sgd() {
  return [](const TensorList& p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.01).momentum(0.9)); };
}

template <class Model>
void plan_steps(benchmark::State& state, const std::vector<std::int64_t>& input) {
  Model model;
  const std::int64_t batch = input[0];
  std::int64_t peak = 0;
  for (auto _ : state) {
    peak = memory::plan(model, {input}, {{batch}, kInt64}, sgd()).peak_allocated;
    benchmark::DoNotOptimize(peak);
  }
  state.counters["peak_MiB"] = static_cast<double>(peak) / (1 << 20);
}

template <class Model>
void real_step(benchmark::State& state, const std::vector<std::int64_t>& input) {
  manual_seed(0);
  Model model;
  auto optimizer = sgd()(model.parameters());
  const Tensor x = rand(input);
  const Tensor y = randint(0, 10, {input[0]});
  auto step = [&] {
    optimizer->zero_grad();
    cross_entropy(model.forward(x), y).backward();
    optimizer->step();
  };
  step();
  for (auto _ : state) step();
}

void BM_PlanMlpStep(benchmark::State& state) { plan_steps<examples::Mlp>(state, {state.range(0), 784}); }
BENCHMARK(BM_PlanMlpStep)->ArgName("batch")->Arg(128)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_RealMlpStep(benchmark::State& state) { real_step<examples::Mlp>(state, {state.range(0), 784}); }
BENCHMARK(BM_RealMlpStep)->ArgName("batch")->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_PlanCnnStep(benchmark::State& state) { plan_steps<examples::Cnn>(state, {state.range(0), 1, 28, 28}); }
BENCHMARK(BM_PlanCnnStep)->ArgName("batch")->Arg(128)->Arg(4096)->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_RealCnnStep(benchmark::State& state) { real_step<examples::Cnn>(state, {state.range(0), 1, 28, 28}); }
BENCHMARK(BM_RealCnnStep)->ArgName("batch")->Arg(128)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
