// tests/bench/interleaved.h — two runs timed turn by turn in one benchmark, for the ratios the
// compiled steps are held to (compiled CNN against its raw oneDNN layers, compiled MLP against
// its GEMMs, Float32 against BFloat16, charlm eager against compiled).
//
// Note [Ratios timed turn by turn]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On the shared machines Kiln is measured on, a benchmark's time drifts by 15-30 % over minutes
// with nothing else running here (most likely the host's other tenants, on its memory and
// caches): the same compiled CNN step took 17.8 ms in one run and 23.3 ms a few minutes later.
// Two benchmarks run one after the other see different hosts, so the ratio of their times
// carries that drift, and a change of a few percent cannot be seen. Here the two runs take
// turns in short blocks (A's block, B's block, then B's, A's: the order alternates), so each
// block of A has one of B beside it under the same conditions. A block repeats its run: the
// first call only warms the caches with that run's own data and is not timed, since a step run
// right after the other one inherits its cache contents (the MLP's step, whose weights fit in
// the cache, took 2.2 ms timed that way against 1.8 ms back to back). The counters are the
// medians of each side's timed calls and their ratio.
// What this removes is the drift between the two sides, not the host's effect on the ratio:
// a load on the host slows memory-bound work more than a compute-bound primitive, so on a busy
// host a compiled step (pools, unpools, elementwise passes) loses more than its floor does.
// On a 2-core Zen 4 three runs in a row gave 1.27-1.28x for the CNN against its layers where
// a quieter quarter of an hour had given 1.19x, and the MLP 1.15x to 1.43x its GEMMs.
// Read next: tests/bench/bench_training.cpp.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace kiln::bench {

/// Runs `a` and `b` twice each untimed (a compiled step's capture, primitives built), then in
/// turn, a block of each per iteration (their order alternating), each call after a block's
/// first timed on its own; reports `<a_name>_ms` and `<b_name>_ms` (medians) and `ratio` (median
/// of a / median of b).
inline void run_interleaved(benchmark::State& state, const std::function<void()>& a, const std::function<void()>& b,
                            const std::string& a_name, const std::string& b_name) {
  constexpr int kTimedPerBlock = 3;
  std::vector<double> a_ms, b_ms;
  const auto block = [](const std::function<void()>& f, std::vector<double>& into) {
    f();  // warms the caches with this run's data; not timed
    for (int i = 0; i < kTimedPerBlock; ++i) {
      const auto start = std::chrono::steady_clock::now();
      f();
      into.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
  };
  for (int i = 0; i < 2; ++i) {
    a();
    b();
  }
  bool a_first = true;
  for (auto _ : state) {
    if (a_first) {
      block(a, a_ms);
      block(b, b_ms);
    } else {
      block(b, b_ms);
      block(a, a_ms);
    }
    a_first = !a_first;
  }
  const auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  if (a_ms.empty()) return;
  const double a_median = median(a_ms), b_median = median(b_ms);
  state.counters[a_name + "_ms"] = a_median;
  state.counters[b_name + "_ms"] = b_median;
  state.counters["ratio"] = a_median / b_median;
}

}  // namespace kiln::bench
