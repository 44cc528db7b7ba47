// tests/bench/bench_rnn.cpp — an LSTM layer's training step (batch 64, sequence 128, input 128,
// hidden 256; forward and backward through time) beside the matrix products it cannot avoid,
// done directly in Eigen on preallocated buffers in the same binary: the input projections of
// the whole sequence (one GEMM), the recurrent product per step, and their gradients (issue
// target: the step within 1.3x its GEMMs). Counter x_gemms = step time / GEMM time.
//   build/tests/bench/bench_rnn
#include <benchmark/benchmark.h>

#include <Eigen/Dense>

#include <chrono>
#include <vector>

#include "kiln.h"

namespace {

using namespace kiln;

constexpr std::int64_t kBatch = 64, kSeq = 128, kInput = 128, kHidden = 256;

double gemm_seconds() {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  struct Gemm {
    Mat a, b, c;
    int repeats;
  };
  auto product = [](Eigen::Index m, Eigen::Index k, Eigen::Index n, int repeats) {
    return Gemm{Mat::Random(m, k), Mat::Random(k, n), Mat(m, n), repeats};
  };
  const Eigen::Index tb = kBatch * kSeq, g = 4 * kHidden;
  Eigen::setNbThreads(get_num_threads());
  std::vector<Gemm> gemms;
  gemms.push_back(product(tb, kInput, g, 1));          // input projections, whole sequence
  gemms.push_back(product(kBatch, kHidden, g, kSeq));  // W_hh h, per step
  gemms.push_back(product(tb, g, kInput, 1));          // gradient of the input
  gemms.push_back(product(g, tb, kInput, 1));          // gradient of W_ih
  gemms.push_back(product(kBatch, g, kHidden, kSeq));  // gradient of h, per step
  gemms.push_back(product(g, tb, kHidden, 1));         // gradient of W_hh, all steps at once
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) {
    for (Gemm& m : gemms) {
      for (int i = 0; i < m.repeats; ++i) m.c.noalias() = m.a * m.b;
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 3;
}

void BM_LstmGemmsOnly(benchmark::State& state) {
  double seconds = 0;
  for (auto _ : state) seconds = gemm_seconds();
  state.counters["gemm_ms"] = seconds * 1e3;
}
BENCHMARK(BM_LstmGemmsOnly)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(2);

void BM_LstmStep(benchmark::State& state) {
  manual_seed(0);
  nn::LSTM lstm(kInput, kHidden);
  const Tensor x = randn({kSeq, kBatch, kInput});
  auto step = [&] {
    lstm.zero_grad();
    std::get<0>(lstm.forward(x)).sum().backward();
  };
  step();
  for (auto _ : state) step();
  const double gemms = gemm_seconds();
  state.counters["gemm_ms"] = gemms * 1e3;
  state.counters["x_gemms"] =
      benchmark::Counter(gemms, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_LstmStep)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
