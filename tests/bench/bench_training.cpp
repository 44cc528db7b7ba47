// tests/bench/bench_training.cpp — one training step of the examples' CNN (batch 128, SGD),
// beside the same step's matrix products done directly in Eigen: the GEMMs are the floor any
// im2col implementation pays, so the ratio says how much Kiln adds around them.
//   build/tests/bench/bench_training --benchmark_filter=Cnn
#include <benchmark/benchmark.h>

#include <Eigen/Dense>

#include <cstring>
#include <vector>

#include "../../examples/support/models.h"
#include "kiln.h"

namespace {

using namespace kiln;

void BM_KilnCnnStepSgd(benchmark::State& state) {
  manual_seed(0);
  examples::Cnn cnn;
  Tensor x = rand({128, 1, 28, 28});
  Tensor y = randint(0, 10, {128});
  optim::SGD sgd(cnn.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const CpuAllocatorStats before = cpu_allocator_stats();
  for (auto _ : state) {
    sgd.zero_grad();
    Tensor loss = nn::functional::cross_entropy(cnn.forward(x), y);
    loss.backward();
    sgd.step();
  }
  const CpuAllocatorStats after = cpu_allocator_stats();
  state.counters["cache_misses/step"] =
      benchmark::Counter(static_cast<double>(after.cache_misses - before.cache_misses) /
                         static_cast<double>(state.iterations()));
}
BENCHMARK(BM_KilnCnnStepSgd)->UseRealTime()->Unit(benchmark::kMillisecond);

// The matrix products of the same step (forward, weight gradients, input gradients), with
// Eigen's own blocking and threading, on preallocated row-major buffers.
void BM_EigenCnnStepGemmsOnly(benchmark::State& state) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  struct Gemm {
    Mat a, b, c;
  };
  auto product = [](Eigen::Index m, Eigen::Index k, Eigen::Index n) {
    return Gemm{Mat::Random(m, k), Mat::Random(k, n), Mat(m, n)};
  };
  const Eigen::Index n = 128;
  std::vector<Gemm> gemms;
  // conv1: columns [N*784, 9] x [9, 32]; weight grad [32, N*784] x [N*784, 9]
  gemms.push_back(product(n * 784, 9, 32));
  gemms.push_back(product(32, n * 784, 9));
  // conv2: columns [N*196, 288] x [288, 64]; weight grad; input grad [N*196, 64] x [64, 288]
  gemms.push_back(product(n * 196, 288, 64));
  gemms.push_back(product(64, n * 196, 288));
  gemms.push_back(product(n * 196, 64, 288));
  // fc1 3136 -> 128 and fc2 128 -> 10: forward, weight grad, input grad
  gemms.push_back(product(n, 3136, 128));
  gemms.push_back(product(128, n, 3136));
  gemms.push_back(product(n, 128, 3136));
  gemms.push_back(product(n, 128, 10));
  gemms.push_back(product(10, n, 128));
  gemms.push_back(product(n, 10, 128));
  for (auto _ : state) {
    for (Gemm& g : gemms) g.c.noalias() = g.a * g.b;
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EigenCnnStepGemmsOnly)->UseRealTime()->Unit(benchmark::kMillisecond);

// The CNN's layers one at a time, beside a memcpy of the layer's input: pooling and the
// column copies (im2col) are memory-bound, so their floor is a pass over the bytes.
void BM_MemcpyConv1Activation(benchmark::State& state) {
  std::vector<float> a(128 * 32 * 28 * 28, 1.0f), b(a.size());
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * a.size() * sizeof(float)));
}
BENCHMARK(BM_MemcpyConv1Activation)->UseRealTime();

void BM_MaxPool2dConv1Activation(benchmark::State& state) {
  Tensor x = rand({128, 32, 28, 28});
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(max_pool2d(x, {2, 2}));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * x.numel() * 4));
}
BENCHMARK(BM_MaxPool2dConv1Activation)->UseRealTime();

void BM_Conv2dForward(benchmark::State& state) {
  manual_seed(0);
  const std::int64_t in = state.range(0), size = state.range(1);
  nn::Conv2d conv(in, 2 * in, 3, nn::Conv2dOptions{.padding = {1, 1}});
  Tensor x = rand({128, in, size, size});
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(conv.forward(x));
}
BENCHMARK(BM_Conv2dForward)->Args({16, 28})->Args({32, 14})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
