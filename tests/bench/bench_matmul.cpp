// tests/bench/bench_matmul.cpp — matmul GFLOP/s beside raw Eigen GEMM on the same shapes
// (square 64..1024, the MLP's 128x784 @ 784x512 and the CNN's fc1), attention's scores on
// interleaved heads beside packed ones, and an MLP's backward beside its forward.
// Run: build/tests/bench/bench_matmul
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cstring>

#include "interleaved.h"
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
  Eigen::setNbThreads(get_num_threads());  // Eigen's own threading: the raw baseline
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
  // The CNN's fc1 (3136 -> 128): its forward, and its input gradient [128, 128] @ w [128, 3136].
  // The latter runs well below Eigen on the library route (2-core Zen 1: 38-41 GFLOP/s against
  // 59-75): with n = 128, oneDNN 2.6's AVX2 sgemm takes its no-copy kernel (1/m + 1/n >=
  // 0.0038), which reads w in place, probably with rows 12,544 bytes apart on 16 of L1's 64
  // sets; the same product with w's data 16 bytes off Kiln's 64-byte alignment ran 1.8x faster.
  b->Args({128, 3136, 128});
  b->Args({128, 128, 3136});
  b->UseRealTime();
}
BENCHMARK(BM_EigenGemm)->Apply(shapes);
BENCHMARK(BM_KilnMatmul)->Apply(shapes);
BENCHMARK(BM_KilnMatmulTransposedWeight)->Apply(shapes);

// Attention's scores Q·Kᵀ on train_charlm's heads (16 sequences of 64, 4 heads of 32): the
// heads as MultiheadAttention makes them, views whose matrices interleave, timed turn by turn
// against the same product on heads packed beforehand. The ratio is what packing inside the
// product costs (Note [Matrices of a batch that interleave]); oneDNN's gemm:jit on the views
// themselves made it 2.5-3x.
void BM_AttentionScoresOnInterleavedHeadsOverPacked(benchmark::State& state) {
  const std::int64_t length = 64, batch = 16, heads = 4, head_dim = 32;
  const Tensor q_rows = randn({length, batch, heads * head_dim}), k_rows = randn({length, batch, heads * head_dim});
  const auto as_heads = [&](const Tensor& rows) { return rows.view({length, batch * heads, head_dim}).transpose(0, 1); };
  const Tensor q = as_heads(q_rows), k = as_heads(k_rows);
  const Tensor q_packed = q.contiguous(), k_packed = k.contiguous();
  const NoGradGuard no_grad;
  bench::run_interleaved(
      state, [&] { benchmark::DoNotOptimize(bmm(q, k.transpose(1, 2)).raw_data_ptr()); },
      [&] { benchmark::DoNotOptimize(bmm(q_packed, k_packed.transpose(1, 2)).raw_data_ptr()); }, "interleaved",
      "packed");
}
BENCHMARK(BM_AttentionScoresOnInterleavedHeadsOverPacked)->UseRealTime()->Unit(benchmark::kMicrosecond);

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

namespace {

// The MLP step split into parts, to see where a training step's time goes.
void BM_MlpStepParts(benchmark::State& state) {
  Mlp mlp;
  Tensor x = rand({128, 784});
  Tensor y = randint(0, 10, {128});
  TensorList params{mlp.w1, mlp.b1, mlp.w2, mlp.b2, mlp.w3, mlp.b3};
  optim::Adam adam(params, optim::AdamOptions(1e-3));
  for (auto _ : state) {
    adam.zero_grad();
    Tensor loss = cross_entropy(mlp.forward(x), y);
    loss.backward();
    if (state.range(0) == 1) adam.step();
  }
}
BENCHMARK(BM_MlpStepParts)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace

namespace {

// The same MLP training step (784-512-256-10, ReLU, softmax cross-entropy, SGD) written
// directly on Eigen: the baseline Kiln's step is measured against.
struct EigenMlp {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::RowVectorXf;
  Mat w1 = Mat::Random(512, 784) * 0.03f, w2 = Mat::Random(256, 512) * 0.04f, w3 = Mat::Random(10, 256) * 0.06f;
  Vec b1 = Vec::Zero(512), b2 = Vec::Zero(256), b3 = Vec::Zero(10);
  Mat h1, h2, z, dz, dh2, dh1, dw1, dw2, dw3;

  float step(const Mat& x, const std::vector<int>& y, float lr) {
    const auto n = static_cast<float>(x.rows());
    h1.noalias() = x * w1.transpose();
    h1 = (h1.rowwise() + b1).cwiseMax(0.0f);
    h2.noalias() = h1 * w2.transpose();
    h2 = (h2.rowwise() + b2).cwiseMax(0.0f);
    z.noalias() = h2 * w3.transpose();
    z.rowwise() += b3;
    // softmax cross-entropy and its gradient (p - onehot) / n
    float loss = 0;
    dz.resize(z.rows(), z.cols());
    for (Eigen::Index i = 0; i < z.rows(); ++i) {
      const float m = z.row(i).maxCoeff();
      dz.row(i) = (z.row(i).array() - m).exp();
      const float s = dz.row(i).sum();
      loss += std::log(s) + m - z(i, y[static_cast<std::size_t>(i)]);
      dz.row(i) /= s;
      dz(i, y[static_cast<std::size_t>(i)]) -= 1;
    }
    dz /= n;
    dw3.noalias() = dz.transpose() * h2;
    dh2.noalias() = dz * w3;
    dh2 = dh2.cwiseProduct((h2.array() > 0).cast<float>().matrix());
    dw2.noalias() = dh2.transpose() * h1;
    dh1.noalias() = dh2 * w2;
    dh1 = dh1.cwiseProduct((h1.array() > 0).cast<float>().matrix());
    dw1.noalias() = dh1.transpose() * x;
    w3 -= lr * dw3;
    b3 -= lr * dz.colwise().sum();
    w2 -= lr * dw2;
    b2 -= lr * dh2.colwise().sum();
    w1 -= lr * dw1;
    b1 -= lr * dh1.colwise().sum();
    return loss / n;
  }
};

void BM_EigenMlpStepSgd(benchmark::State& state) {
  Eigen::setNbThreads(get_num_threads());  // Eigen's own threading: the raw baseline
  EigenMlp mlp;
  EigenMlp::Mat x = EigenMlp::Mat::Random(128, 784).cwiseAbs();
  std::vector<int> y(128);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int>(i % 10);
  for (auto _ : state) benchmark::DoNotOptimize(mlp.step(x, y, 0.01f));
}
BENCHMARK(BM_EigenMlpStepSgd)->UseRealTime();

void BM_KilnMlpStepSgd(benchmark::State& state) {
  Mlp mlp;
  Tensor x = rand({128, 784});
  Tensor y = tensor(std::vector<std::int64_t>(128, 3));
  optim::SGD sgd({mlp.w1, mlp.b1, mlp.w2, mlp.b2, mlp.w3, mlp.b3}, optim::SGDOptions(0.01));
  for (auto _ : state) {
    sgd.zero_grad();
    Tensor loss = cross_entropy(mlp.forward(x), y);
    loss.backward();
    sgd.step();
  }
}
BENCHMARK(BM_KilnMlpStepSgd)->UseRealTime();

}  // namespace

namespace {

// One optimizer step over the MLP's 535,818 parameters, beside the memcpy of the same bytes
// (Adam reads p, g, m, v and writes p, m, v: 7 arrays).
void BM_AdamStepOnly(benchmark::State& state) {
  Mlp mlp;
  TensorList params{mlp.w1, mlp.b1, mlp.w2, mlp.b2, mlp.w3, mlp.b3};
  for (Tensor& p : params) p.mutable_grad() = randn(p.sizes());
  optim::Adam adam(params, optim::AdamOptions(1e-3));
  for (auto _ : state) adam.step();
  state.SetBytesProcessed(state.iterations() * 535818 * 7 * 4);
}
BENCHMARK(BM_AdamStepOnly)->UseRealTime();

void BM_AdamStepMemcpyBaseline(benchmark::State& state) {
  const std::size_t n = 535818;
  std::vector<float> a(4 * n, 1.0f), b(3 * n);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), 3 * n * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 7 * n * 4) / 2 * 2);
}
BENCHMARK(BM_AdamStepMemcpyBaseline)->UseRealTime();

}  // namespace
