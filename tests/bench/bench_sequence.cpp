// tests/bench/bench_sequence.cpp — sequence layers' training steps beside the matrix products
// they cannot avoid, done directly in Eigen on preallocated buffers in the same binary:
//   - an LSTM layer (batch 64, sequence 128, input 128, hidden 256; forward and backward through
//     time): the input projections of the whole sequence (one GEMM), the recurrent product per
//     step, and their gradients (issue target: within 1.3x its GEMMs); a GRU layer of the same
//     sizes, whose recurrence is composed from ops, beside its own;
//   - multi-head self-attention (batch 32, sequence 256, width 256, 4 heads; forward and
//     backward, no weights returned): the in and out projections, scores and weighted sums per
//     head, and their gradients (target: within 1.5x);
//   - train_charlm's whole step at its defaults (the Transformer, batch 8 x 128 characters,
//     AdamW and gradient clipping) beside its FLOP floor at the machine's measured peak, eagerly
//     and compiled, and the two timed turn by turn for their ratio (tests/bench/interleaved.h).
// Counter x_gemms = step time / GEMM time; x_floor = step time / FLOP floor.
//   build/tests/bench/bench_sequence
#include <benchmark/benchmark.h>

#include <Eigen/Dense>

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "../../examples/support/charlm.h"
#include "core/kernels.h"
#include "kiln.h"
#include "interleaved.h"
#include "step_flops.h"

namespace {

using namespace kiln;

constexpr std::int64_t kBatch = 64, kSeq = 128, kInput = 128, kHidden = 256;

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
struct Gemm {
  Mat a, b, c;
  int repeats;
};

Gemm product(Eigen::Index m, Eigen::Index k, Eigen::Index n, int repeats) {
  return Gemm{Mat::Random(m, k), Mat::Random(k, n), Mat(m, n), repeats};
}

/// Seconds for one pass over `gemms` (the mean of three).
double seconds_of(std::vector<Gemm>& gemms) {
  Eigen::setNbThreads(get_num_threads());
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 3; ++r) {
    for (Gemm& m : gemms) {
      for (int i = 0; i < m.repeats; ++i) m.c.noalias() = m.a * m.b;
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 3;
}

/// A recurrent layer's products with `gates` gates (LSTM 4, GRU 3) of kHidden each.
template <int Gates>
double recurrent_gemm_seconds() {
  const Eigen::Index tb = kBatch * kSeq, g = Gates * kHidden;
  std::vector<Gemm> gemms;
  gemms.push_back(product(tb, kInput, g, 1));          // input projections, whole sequence
  gemms.push_back(product(kBatch, kHidden, g, kSeq));  // W_hh h, per step
  gemms.push_back(product(tb, g, kInput, 1));          // gradient of the input
  gemms.push_back(product(g, tb, kInput, 1));          // gradient of W_ih
  gemms.push_back(product(kBatch, g, kHidden, kSeq));  // gradient of h, per step
  gemms.push_back(product(g, tb, kHidden, 1));         // gradient of W_hh, all steps at once
  return seconds_of(gemms);
}

constexpr std::int64_t kAttnBatch = 32, kAttnSeq = 256, kWidth = 256, kHeads = 4;

double attention_gemm_seconds() {
  const Eigen::Index bt = kAttnBatch * kAttnSeq, hd = kWidth / kHeads;
  const int per_head = static_cast<int>(kAttnBatch * kHeads);
  std::vector<Gemm> gemms;
  gemms.push_back(product(bt, kWidth, 3 * kWidth, 1));          // q, k, v projections
  gemms.push_back(product(kAttnSeq, hd, kAttnSeq, per_head));    // scores q kᵀ
  gemms.push_back(product(kAttnSeq, kAttnSeq, hd, per_head));    // weights v
  gemms.push_back(product(bt, kWidth, kWidth, 1));              // out projection
  gemms.push_back(product(bt, kWidth, kWidth, 2));              // its gradients (input, weight)
  gemms.push_back(product(kAttnSeq, hd, kAttnSeq, per_head));    // d(weights) = dO vᵀ
  gemms.push_back(product(kAttnSeq, kAttnSeq, hd, per_head * 3)); // dV, dQ, dK
  gemms.push_back(product(bt, 3 * kWidth, kWidth, 2));          // in-projection gradients
  return seconds_of(gemms);
}

void BM_LstmGemmsOnly(benchmark::State& state) {
  double seconds = 0;
  for (auto _ : state) seconds = recurrent_gemm_seconds<4>();
  state.counters["gemm_ms"] = seconds * 1e3;
}
BENCHMARK(BM_LstmGemmsOnly)->UseRealTime()->Unit(benchmark::kMillisecond)->Iterations(2);

/// Times `step` (after one warm-up) and reports it against `gemm_seconds()` measured in the same
/// run: counters gemm_ms and x_gemms (step time / GEMM time).
template <class Step>
void time_against_gemms(benchmark::State& state, const Step& step, double (*gemm_seconds)()) {
  step();
  for (auto _ : state) step();
  const double gemms = gemm_seconds();
  state.counters["gemm_ms"] = gemms * 1e3;
  state.counters["x_gemms"] =
      benchmark::Counter(gemms, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// A recurrent layer's forward and backward over the sequence, against its products.
template <class Layer, int Gates>
void recurrent_step(benchmark::State& state) {
  manual_seed(0);
  Layer layer(kInput, kHidden);
  const Tensor x = randn({kSeq, kBatch, kInput});
  auto step = [&] {
    layer.zero_grad();
    std::get<0>(layer.forward(x)).sum().backward();
  };
  time_against_gemms(state, step, recurrent_gemm_seconds<Gates>);
}

void BM_LstmStep(benchmark::State& state) { recurrent_step<nn::LSTM, 4>(state); }
BENCHMARK(BM_LstmStep)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_GruStep(benchmark::State& state) { recurrent_step<nn::GRU, 3>(state); }
BENCHMARK(BM_GruStep)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_AttentionStep(benchmark::State& state) {
  manual_seed(0);
  nn::MultiheadAttention attention(kWidth, kHeads, {.batch_first = true});
  const Tensor x = randn({kAttnBatch, kAttnSeq, kWidth});
  auto step = [&] {
    attention.zero_grad();
    std::get<0>(attention.forward(x, x, x, {}, /*need_weights=*/false)).sum().backward();
  };
  time_against_gemms(state, step, attention_gemm_seconds);
}
BENCHMARK(BM_AttentionStep)->UseRealTime()->Unit(benchmark::kMillisecond);

/// Multiply-adds x 2 of one train_charlm Transformer step: per layer the q, k, v, out and
/// feed-forward projections (12 d^2 a token) and attention's scores and weighted sums (2 T d a
/// token), the output layer (d V a token); each forward, input gradient and weight gradient.
double charlm_step_flops(const examples::CharModelShape& s, double batch) {
  const double tokens = batch * static_cast<double>(s.context), d = static_cast<double>(s.width);
  const double per_layer = 12 * d * d + 2 * static_cast<double>(s.context) * d;
  const double per_token = static_cast<double>(s.layers) * per_layer + d * static_cast<double>(s.vocab);
  return 3 * bench::gemm_flops(tokens, per_token, 1);
}

/// train_charlm's step at its defaults on one fixed batch, from seed 0: the Transformer, AdamW,
/// and gradient clipping. Two made one after the other hold the same weights and batch.
struct CharLmTraining {
  CharLmTraining() : config(defaults()), model(seeded_model(config)), optimizer(model->parameters(), adamw(config)) {
    x = randint(0, config.shape.vocab, {config.batch_size, config.shape.context});
    y = randint(0, config.shape.vocab, {config.batch_size, config.shape.context});
  }
  Tensor step(const Tensor& input, const Tensor& target) {
    return examples::train_step(*model, optimizer, input, target, config.clip);
  }
  double flops() const { return charlm_step_flops(config.shape, static_cast<double>(config.batch_size)); }

  examples::CharLmConfig config;
  std::shared_ptr<examples::CharModel> model;
  optim::AdamW optimizer;
  Tensor x, y;

 private:
  static examples::CharLmConfig defaults() {
    examples::CharLmConfig c;
    c.shape.vocab = 114;  // the fortunes text's characters
    c.shape.context = examples::default_context(c.shape.kind);
    c.batch_size = examples::default_batch_size(c.shape.kind);
    return c;
  }
  static std::shared_ptr<examples::CharModel> seeded_model(const examples::CharLmConfig& c) {
    manual_seed(0);
    return examples::make_char_model(c.shape);
  }
  static optim::AdamWOptions adamw(const examples::CharLmConfig& c) {
    return optim::AdamWOptions(c.peak_lr()).weight_decay(c.weight_decay);
  }
};

void BM_CharLmTransformerStep(benchmark::State& state) {
  CharLmTraining t;
  t.step(t.x, t.y);
  for (auto _ : state) t.step(t.x, t.y);
  bench::report_flops(state, t.flops());
}
BENCHMARK(BM_CharLmTransformerStep)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same step captured once and replayed (train_charlm --compile).
void BM_CharLmTransformerStepCompiled(benchmark::State& state) {
  CharLmTraining t;
  auto step = kiln::compile([&](const Tensor& input, const Tensor& target) { return t.step(input, target); });
  step(t.x, t.y);
  step(t.x, t.y);
  const std::int64_t allocations = cpu_allocator_stats().allocations;
  for (auto _ : state) step(t.x, t.y);
  state.counters["allocations/step"] = benchmark::Counter(
      static_cast<double>(cpu_allocator_stats().allocations - allocations) / static_cast<double>(state.iterations()));
  state.counters["replayed"] = step.last_call_replayed() ? 1 : 0;
  state.counters["kernels"] = static_cast<double>(step.graph().count(compiler::Node::Kind::Kernel));
  bench::report_flops(state, t.flops());
}
BENCHMARK(BM_CharLmTransformerStepCompiled)->UseRealTime()->Unit(benchmark::kMillisecond);

// The eager and the compiled step timed turn by turn (Note [Ratios timed turn by turn] in
// interleaved.h): ratio = eager over compiled, the speed-up compiling gives. Two trainings from
// the same seed, one per step.
void BM_CharLmTransformerStepEagerOverCompiled(benchmark::State& state) {
  CharLmTraining eager, traced;
  auto compiled = kiln::compile([&](const Tensor& input, const Tensor& target) { return traced.step(input, target); });
  bench::run_interleaved(
      state, [&] { eager.step(eager.x, eager.y); }, [&] { compiled(traced.x, traced.y); }, "eager", "compiled");
  state.counters["replayed"] = compiled.last_call_replayed() ? 1 : 0;
}
BENCHMARK(BM_CharLmTransformerStepEagerOverCompiled)->UseRealTime()->Unit(benchmark::kMillisecond);

// The fused attention kernels alone (core/cpu/attention.cpp, what fuse_attention puts in the
// compiled step) on train_charlm's heads: 8 sequences x 4 heads of 128 x 128 causal scores
// (the Transformer's default window), head_dim 32, the heads interleaved in the projections'
// rows as batch-first MultiheadAttention leaves them. route 0: forward, 1: backward. x_floor
// against the FLOPs of the live (unmasked) half.
void BM_FusedAttentionCharLmHeads(benchmark::State& state) {
  constexpr std::int64_t kSequences = 8, kCharHeads = 4, kLength = 128, kHeadDim = 32;
  const std::int64_t heads = kSequences * kCharHeads;
  manual_seed(0);
  const auto interleaved_heads = [&] {
    // [N, L, E] rows as the projections write them, seen as [N, heads, L, head_dim].
    return randn({kSequences, kLength, kCharHeads, kHeadDim}).transpose(1, 2);
  };
  const Tensor q = interleaved_heads(), k = interleaved_heads(), v = interleaved_heads();
  const Tensor grad_out = interleaved_heads();
  const Tensor grad_q = interleaved_heads(), grad_k = interleaved_heads(), grad_v = interleaved_heads();
  const Tensor out = interleaved_heads();
  const Tensor mask = full({kLength, kLength}, -std::numeric_limits<float>::infinity()).triu(1).expand(
      {heads, kLength, kLength});
  const Tensor probs = empty({heads, kLength, kLength}), scale = full({}, 1.0 / std::sqrt(double(kHeadDim)));
  const AttentionKernels& kernels = registered_kernels(DeviceType::CPU).attention;
  kernels.forward(out, probs, q, k, v, mask, scale);
  const bool backward = state.range(0) == 1;
  for (auto _ : state) {
    if (backward) kernels.backward(grad_q, grad_k, grad_v, grad_out, q, k, v, probs, scale);
    else kernels.forward(out, probs, q, k, v, mask, scale);
  }
  // Two products of L x S x D forward, four backward; the causal mask leaves (L + 1) / 2L of them.
  const double live = double(kLength + 1) / (2.0 * kLength);
  const double products = backward ? 4.0 : 2.0;
  bench::report_flops(state, products * 2.0 * double(heads * kLength * kLength * kHeadDim) * live);
}
BENCHMARK(BM_FusedAttentionCharLmHeads)->ArgName("route")->Arg(0)->Arg(1)->UseRealTime()->Unit(
    benchmark::kMicrosecond);

}  // namespace
