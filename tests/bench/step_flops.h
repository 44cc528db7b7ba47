// tests/bench/step_flops.h — the multiply-adds of the benchmarked training steps, counted from
// their shapes (2 FLOPs each; elementwise work is not counted: it is memory-bound), and the
// counters that set a measured time beside the FLOP floor at the machine's measured peak.
// Read next: tests/bench/bench_training.cpp.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>

#include "fma_peak.h"

namespace kiln::bench {

/// conv [n, c, h, w] -> [n, o, h, w] with a k x k window, one direction.
constexpr double conv_flops(double n, double c, double o, double h, double w, double k) {
  return 2 * n * o * h * w * c * k * k;
}
constexpr double gemm_flops(double m, double k, double n) { return 2 * m * k * n; }

/// examples::Cnn at batch n: conv1 forward and weight gradient (the images need no gradient),
/// conv2 forward and both gradients, fc1 and fc2 forward and both gradients.
constexpr double cnn_step_flops(double n) {
  return 2 * conv_flops(n, 1, 32, 28, 28, 3) + 3 * conv_flops(n, 32, 64, 14, 14, 3) + 3 * gemm_flops(n, 3136, 128) +
         3 * gemm_flops(n, 128, 10);
}
/// The MLP 784-512-256-10 at batch n: the first layer's input needs no gradient.
constexpr double mlp_step_flops(double n) {
  return 2 * gemm_flops(n, 784, 512) + 3 * gemm_flops(n, 512, 256) + 3 * gemm_flops(n, 256, 10);
}

/// GFLOP/s of an iteration doing `flops`, and x_floor: its time over the time `flops` take at
/// the peak measured in this process.
inline void report_flops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["x_floor"] = benchmark::Counter(flops * 1e-9 / measured_peak_gflops(),
                                                 benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace kiln::bench
