// tests/bench/bench_reduce.cpp — sum and mean along each reduction layout (Note [Reduction
// layouts] in core/cpu/reduce.cpp) beside memcpy of the same bytes: a reduction reads its input
// once, so a copy of that input is the floor it is measured against.
//   build/tests/bench/bench_reduce
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

void set_bytes(benchmark::State& state, std::int64_t elements) {
  state.SetBytesProcessed(state.iterations() * elements * static_cast<std::int64_t>(sizeof(float)));
}

void BM_MemcpyBaseline(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
  }
  set_bytes(state, state.range(0));
}
// 262,144 floats: the attention scores below; 802,816: batch norm's [128, 8, 28, 28].
BENCHMARK(BM_MemcpyBaseline)->Arg(100'352)->Arg(262'144)->Arg(802'816)->Arg(1'000'000)->Arg(10'000'000)->UseRealTime();

// Every element into one output (layout A with one block).
void BM_SumAll(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor x = rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum().raw_data_ptr());
  set_bytes(state, n);
}
BENCHMARK(BM_SumAll)->Arg(100'352)->Arg(1'000'000)->Arg(10'000'000)->UseRealTime();

void BM_MeanAll(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor x = rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(x.mean().raw_data_ptr());
  set_bytes(state, n);
}
BENCHMARK(BM_MeanAll)->Arg(10'000'000)->UseRealTime();

// Layout A, many outputs: rows of softmax's width, and four long rows.
void BM_SumLastDim(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  Tensor x = rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum({1}).raw_data_ptr());
  set_bytes(state, rows * cols);
}
BENCHMARK(BM_SumLastDim)->Args({256, 4096})->Args({4, 1'000'000})->UseRealTime();

// Layout B: the reduced dim first (a bias gradient over the batch).
void BM_SumFirstDim(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  Tensor x = rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum({0}).raw_data_ptr());
  set_bytes(state, rows * cols);
}
BENCHMARK(BM_SumFirstDim)->Args({128, 512})->Args({4096, 1024})->Args({1'000'000, 4})->Args({1'000'000, 2})->UseRealTime();

// Narrow layout B (a [N, 2] tensor over dim 0: the held-out accuracy probe's layout of issue
// 32) as mean and var: mean is one pass; var is the two-pass composite (the mean, then the
// centred squares), so its floor is a few memcpys, not one.
void BM_MeanFirstDim(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  Tensor x = rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(x.mean({0}).raw_data_ptr());
  set_bytes(state, rows * cols);
}
BENCHMARK(BM_MeanFirstDim)->Args({1'000'000, 2})->UseRealTime();

void BM_VarFirstDim(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  Tensor x = rand({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(x.var({0}).raw_data_ptr());
  set_bytes(state, rows * cols);
}
BENCHMARK(BM_VarFirstDim)->Args({1'000'000, 2})->Args({4096, 1024})->UseRealTime();

void BM_VarAll(benchmark::State& state) {
  Tensor x = rand({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(x.var({0}).raw_data_ptr());
  set_bytes(state, state.range(0));
}
BENCHMARK(BM_VarAll)->Arg(1'000'000)->UseRealTime();

// A reduced dim between kept ones: [B, T, C] over T (a mean over a sequence), here with a
// narrow C and with a wide one.
void BM_SumMiddleDim(benchmark::State& state) {
  const std::int64_t b = state.range(0), t = state.range(1), c = state.range(2);
  Tensor x = rand({b, t, c});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum({1}).raw_data_ptr());
  set_bytes(state, b * t * c);
}
BENCHMARK(BM_SumMiddleDim)->Args({1000, 1000, 2})->Args({16, 256, 512})->UseRealTime();

// Layout C: batch norm's per-channel reduction of [N, C, H, W] over {0, 2, 3}.
void BM_SumChannels(benchmark::State& state) {
  Tensor x = rand({128, 8, 28, 28});
  for (auto _ : state) benchmark::DoNotOptimize(x.sum({0, 2, 3}).raw_data_ptr());
  set_bytes(state, x.numel());
}
BENCHMARK(BM_SumChannels)->UseRealTime();

void BM_MeanChannels(benchmark::State& state) {
  Tensor x = rand({128, 8, 28, 28});
  for (auto _ : state) benchmark::DoNotOptimize(x.mean({0, 2, 3}).raw_data_ptr());
  set_bytes(state, x.numel());
}
BENCHMARK(BM_MeanChannels)->UseRealTime();

// Softmax forward and backward over attention scores [batch 16 x 4 heads x 64 queries, 64
// keys], fused (Note [One pass per softmax row]) and composed from the ops it replaced. Both
// read the scores and the output's gradient and write two tensors; the floor is a few
// memcpys of 262,144 floats.
void softmax_step(benchmark::State& state, bool fused) {
  Tensor x = randn({4096, 64}).as_leaf();
  const Tensor g = randn({4096, 64});
  for (auto _ : state) {
    Tensor y;
    if (fused) {
      y = x.softmax(-1);
    } else {
      const Tensor e = (x - x.detach().amax(-1, true)).exp();
      y = e / e.sum(-1, true);
    }
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data_ptr());
    x.mutable_grad() = Tensor();
  }
  set_bytes(state, x.numel());
}
void BM_SoftmaxStepFused(benchmark::State& state) { softmax_step(state, true); }
void BM_SoftmaxStepComposed(benchmark::State& state) { softmax_step(state, false); }
BENCHMARK(BM_SoftmaxStepFused)->UseRealTime();
BENCHMARK(BM_SoftmaxStepComposed)->UseRealTime();

}  // namespace
