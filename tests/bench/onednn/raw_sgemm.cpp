// tests/bench/onednn/raw_sgemm.cpp — oneDNN's dnnl_sgemm on the shapes of bench_matmul, linked
// into it where oneDNN is built: the raw library GEMM beside Kiln's matmul (which runs
// oneDNN's matmul primitive on the library route) and raw Eigen, in one run.
//   build/tests/bench/bench_matmul --benchmark_filter='Sgemm|KilnMatmul|EigenGemm'
// Read next: core/onednn/matmul.cpp.
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.h>

#include <vector>

namespace {

void BM_OneDnnSgemm(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  std::vector<float> a(static_cast<std::size_t>(m * k), 0.5f), b(static_cast<std::size_t>(k * n), 0.25f),
      c(static_cast<std::size_t>(m * n));
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(2 * m * k * n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_OneDnnSgemm)
    ->Args({64, 64, 64})->Args({128, 128, 128})->Args({256, 256, 256})->Args({512, 512, 512})
    ->Args({1024, 1024, 1024})->Args({128, 784, 512})->UseRealTime();

}  // namespace
