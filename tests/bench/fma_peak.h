// tests/bench/fma_peak.h — the machine's Float32 peak, measured: every thread runs ten
// independent chains of vector FMAs (enough to cover the FMA latency on Zen and Intel cores)
// for a fixed count, and the total FLOPs over the wall time is the peak the benchmarks
// compare their steps with (the FLOP floor: a step's multiply-adds at this rate).
// Read next: tests/bench/bench_training.cpp.
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace kiln::bench {

#ifdef __AVX512F__
using FloatVector = float __attribute__((vector_size(64)));
#else
using FloatVector = float __attribute__((vector_size(32)));
#endif
inline constexpr int kFmaChains = 10;
inline constexpr int kLanes = sizeof(FloatVector) / sizeof(float);

/// `iterations` rounds of kFmaChains independent FMAs on one thread; returns a value that
/// depends on every chain, so the compiler keeps them.
__attribute__((noinline)) inline float fma_chains(std::int64_t iterations) {
  FloatVector acc[kFmaChains];
  for (int i = 0; i < kFmaChains; ++i) acc[i] = FloatVector{} + static_cast<float>(i) * 1e-3f;
  const FloatVector a = FloatVector{} + 0.999999f, b = FloatVector{} + 1e-6f;
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kFmaChains; ++i) acc[i] = acc[i] * a + b;
  }
  float sum = 0;
  for (int i = 0; i < kFmaChains; ++i) {
    for (int j = 0; j < kLanes; ++j) sum += acc[i][j];
  }
  return sum;
}

/// GFLOP/s of FMA chains on OpenMP's threads (2 FLOPs per lane per FMA).
inline double fma_peak_gflops(std::int64_t iterations = 20'000'000) {
  float sink = 0;
  const auto start = std::chrono::steady_clock::now();
  int threads = 1;
#pragma omp parallel reduction(+ : sink)
  {
#pragma omp single
    threads = omp_get_num_threads();
    sink += fma_chains(iterations);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float keep = sink;
  (void)keep;
  return 2.0 * kFmaChains * kLanes * static_cast<double>(iterations) * threads / seconds * 1e-9;
}

/// The peak measured once per process: the best of three runs, since a run that starts while
/// the other threads are still busy (a step benchmark just ended) reads low.
inline double measured_peak_gflops() {
  static const double peak = [] {
    double best = 0;
    for (int run = 0; run < 3; ++run) best = std::max(best, fma_peak_gflops());
    return best;
  }();
  return peak;
}

}  // namespace kiln::bench
