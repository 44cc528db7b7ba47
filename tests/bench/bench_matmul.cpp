// tests/bench/bench_matmul.cpp — matmul GFLOP/s beside raw Eigen GEMM on the same shapes
// (square 64..1024 and the MLP's 128x784 @ 784x512), and an MLP's backward beside its forward.
// Run: build/tests/bench/bench_matmul
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "kiln.h"

using namespace kiln;

namespace {

void set_flops(benchmark::State& state, std::int64_t m, std::int64_t k, std::int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(2 * m * k * n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_EigenGemm(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat a = Mat::Random(m, k), b = Mat::Random(k, n), c(m, n);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, m, k, n);
}

void BM_KilnMatmul(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor a = rand({m, k}), b = rand({k, n});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b).raw_data_ptr());
  set_flops(state, m, k, n);
}

void BM_KilnMatmulTransposedWeight(benchmark::State& state) {
  // linear's layout: x @ w.t() with w [n, k], mapped without a copy
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  Tensor a = rand({m, k}), w = rand({n, k});
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, w.t()).raw_data_ptr());
  set_flops(state, m, k, n);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int s : {64, 128, 256, 512, 1024}) b->Args({s, s, s});
  b->Args({128, 784, 512});
  b->UseRealTime();
}
BENCHMARK(BM_EigenGemm)->Apply(shapes);
BENCHMARK(BM_KilnMatmul)->Apply(shapes);
BENCHMARK(BM_KilnMatmulTransposedWeight)->Apply(shapes);

// --- MLP 784-512-256-10, batch 128: backward beside forward -------------------------------------

struct Mlp {
  Tensor w1 = (randn({512, 784}) * 0.03).as_leaf(true), b1 = zeros({512}, requires_grad());
  Tensor w2 = (randn({256, 512}) * 0.04).as_leaf(true), b2 = zeros({256}, requires_grad());
  Tensor w3 = (randn({10, 256}) * 0.06).as_leaf(true), b3 = zeros({10}, requires_grad());
  Tensor forward(const Tensor& x) const {
    return linear(linear(linear(x, w1, b1).relu(), w2, b2).relu(), w3, b3);
  }
};

void BM_MlpForward(benchmark::State& state) {
  Mlp mlp;
  Tensor x = rand({128, 784});
  Tensor y = randint(0, 10, {128});
  for (auto _ : state) benchmark::DoNotOptimize(cross_entropy(mlp.forward(x), y).raw_data_ptr());
}
BENCHMARK(BM_MlpForward)->UseRealTime();

void BM_MlpForwardBackward(benchmark::State& state) {
  Mlp mlp;
  Tensor x = rand({128, 784});
  Tensor y = randint(0, 10, {128});
  for (auto _ : state) cross_entropy(mlp.forward(x), y).backward();
}
BENCHMARK(BM_MlpForwardBackward)->UseRealTime();

}  // namespace
