// tests/bench/bench_training.cpp — training steps beside the limits they are measured against,
// all in one binary so the ratios come from one run:
//   - the machine's Float32 peak (BM_FmaPeak) and each step's FLOP floor at that peak
//     (counter x_floor = step time / floor);
//   - the examples' CNN (batch 128, SGD) and MLP 784-512-256-10 (batch 128, SGD) on the
//     build's default routes (route:1, as train_cnn runs: oneDNN for convolution and matrix
//     products) and the Eigen route (route:0);
//   - the same step's matrix products done directly in Eigen, and (tests/bench/onednn/
//     raw_layers.cpp, where oneDNN is built) its layers as raw oneDNN primitives;
//   - single layers beside memcpy (pooling forward and backward) or raw oneDNN (a
//     convolution forward + backward).
//   - the compiled steps and their floors (the raw layers, the raw GEMMs, the Float32 step
//     against the BFloat16 one) timed turn by turn in one benchmark, for their ratios
//     (tests/bench/interleaved.h: BM_*Over*), and the CNN step's capturing call beside an
//     eager step.
// Counters: oneDNN primitives built and fallbacks per step (both 0 at steady state), CPU
// cache misses per step.
//   build/tests/bench/bench_training --benchmark_filter='Step|Peak'
#include <benchmark/benchmark.h>

#include <Eigen/Dense>

#include <cstring>
#include <optional>
#include <vector>

#include "../../examples/support/models.h"
#include "core/cpu/cpu_kernels.h"
#include "core/ops/conv.h"
#include "kiln.h"
#include "interleaved.h"
#include "step_flops.h"
#include "training_step.h"

namespace {

using namespace kiln;

void BM_FmaPeak(benchmark::State& state) {
  double gflops = 0;
  for (auto _ : state) gflops = bench::fma_peak_gflops(5'000'000);
  state.counters["GFLOP/s"] = gflops;
  state.counters["threads"] = get_num_threads();
}
BENCHMARK(BM_FmaPeak)->UseRealTime()->Unit(benchmark::kMillisecond);

/// Counters every step reports: what oneDNN built or handed back, and CPU cache misses.
class StepCounters {
 public:
  StepCounters() : onednn_(backends::onednn_stats()), cache_(cpu_allocator_stats()) {}
  void report(benchmark::State& state) const {
    const auto per_step = [&](std::int64_t n) {
      return benchmark::Counter(static_cast<double>(n) / static_cast<double>(state.iterations()));
    };
    const backends::OneDnnStats onednn = backends::onednn_stats();
    state.counters["primitives_built/step"] = per_step(onednn.primitives_created - onednn_.primitives_created);
    state.counters["fallbacks/step"] = per_step(onednn.fallbacks - onednn_.fallbacks);
    state.counters["reorders/step"] = per_step(onednn.reorders - onednn_.reorders);
    state.counters["cache_misses/step"] = per_step(cpu_allocator_stats().cache_misses - cache_.cache_misses);
    state.counters["allocations/step"] = per_step(cpu_allocator_stats().allocations - cache_.allocations);
  }

 private:
  backends::OneDnnStats onednn_;
  CpuAllocatorStats cache_;
};

/// Steps of `model` on (x, y) (bench::SgdTrainingStep), two untimed first so that the timed
/// loop finds what the step needs already built. route:1 runs the build's defaults (what
/// train_cnn and train_mlp run: oneDNN for convolution and matrix products, Kiln's kernels for
/// pooling); route:0 turns every library route off.
template <class Model>
void train_steps(benchmark::State& state, Model& model, const Tensor& x, const Tensor& y, double flops,
                 bool mixed_precision = false, bool compiled = false) {
  std::optional<backends::OpKernelsGuard> eigen_route;
  if (state.range(0) == 0) eigen_route.emplace(DeviceType::CPU, false);
  bench::SgdTrainingStep step(model, x, y, {.mixed_precision = mixed_precision, .compiled = compiled});
  step();
  step();
  const StepCounters counters;
  for (auto _ : state) step();
  counters.report(state);
  if (compiled) {
    state.counters["kernels"] = static_cast<double>(step.compiled().graph().count(compiler::Node::Kind::Kernel));
    state.counters["replayed"] = step.compiled().last_call_replayed() ? 1 : 0;
  }
  bench::report_flops(state, flops);
}

void BM_CnnStep(benchmark::State& state) {
  manual_seed(0);
  examples::Cnn cnn;
  train_steps(state, cnn, rand({128, 1, 28, 28}), randint(0, 10, {128}), bench::cnn_step_flops(128));
}
BENCHMARK(BM_CnnStep)->ArgName("route")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

// The CNN step under CPU autocast to BFloat16 (amp_train's step), on the build's defaults.
// x_floor is still against the Float32 peak: below 1 only BFloat16 kernels can take it.
void BM_CnnStepAutocastBFloat16(benchmark::State& state) {
  manual_seed(0);
  examples::Cnn cnn;
  state.counters["native_bf16"] = backends::onednn_has_bf16() ? 1 : 0;
  train_steps(state, cnn, rand({128, 1, 28, 28}), randint(0, 10, {128}), bench::cnn_step_flops(128), true);
}
BENCHMARK(BM_CnnStepAutocastBFloat16)->ArgName("route")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The same steps captured once and replayed (kiln::compile, compile/compile.h).
void BM_CnnStepCompiled(benchmark::State& state) {
  manual_seed(0);
  examples::Cnn cnn;
  train_steps(state, cnn, rand({128, 1, 28, 28}), randint(0, 10, {128}), bench::cnn_step_flops(128), false, true);
}
BENCHMARK(BM_CnnStepCompiled)->ArgName("route")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CnnStepAutocastBFloat16Compiled(benchmark::State& state) {
  manual_seed(0);
  examples::Cnn cnn;
  state.counters["native_bf16"] = backends::onednn_has_bf16() ? 1 : 0;
  train_steps(state, cnn, rand({128, 1, 28, 28}), randint(0, 10, {128}), bench::cnn_step_flops(128), true, true);
}
BENCHMARK(BM_CnnStepAutocastBFloat16Compiled)->ArgName("route")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// The two compiled CNN steps timed turn by turn (Note [Ratios timed turn by turn] in
// interleaved.h): ratio = the Float32 step over the BFloat16 autocast one.
void BM_CnnStepCompiledFloat32OverBFloat16(benchmark::State& state) {
  manual_seed(0);
  const Tensor x = rand({128, 1, 28, 28}), y = randint(0, 10, {128});
  manual_seed(0);
  examples::Cnn float32_model;
  manual_seed(0);
  examples::Cnn bfloat16_model;
  bench::SgdTrainingStep float32(float32_model, x, y, {.compiled = true});
  bench::SgdTrainingStep bfloat16(bfloat16_model, x, y, {.mixed_precision = true, .compiled = true});
  state.counters["native_bf16"] = backends::onednn_has_bf16() ? 1 : 0;
  bench::run_interleaved(state, [&] { float32(); }, [&] { bfloat16(); }, "float32", "bfloat16");
}
BENCHMARK(BM_CnnStepCompiledFloat32OverBFloat16)->UseRealTime()->Unit(benchmark::kMillisecond);

// The capturing call of the compiled CNN step (a new kiln::compile each time: the step run
// eagerly while recorded, the passes, the arena's plan) and an eager step, turn by turn:
// capture_ms is what the first call of `train_cnn --compile` costs (issue target < 500 ms),
// ratio = capture over eager.
void BM_CnnStepCaptureOverEager(benchmark::State& state) {
  manual_seed(0);
  const Tensor x = rand({128, 1, 28, 28}), y = randint(0, 10, {128});
  examples::Cnn captured_model, eager_model;
  bench::SgdTrainingStep eager(eager_model, x, y, {});
  bench::run_interleaved(
      state,
      [&] {
        bench::SgdTrainingStep fresh(captured_model, x, y, {.compiled = true});
        fresh();
      },
      [&] { eager(); }, "capture", "eager");
}
BENCHMARK(BM_CnnStepCaptureOverEager)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_MlpStepCompiled(benchmark::State& state) {
  manual_seed(0);
  examples::Mlp mlp;
  train_steps(state, mlp, rand({128, 784}), randint(0, 10, {128}), bench::mlp_step_flops(128), false, true);
}
BENCHMARK(BM_MlpStepCompiled)->ArgName("route")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_MlpStep(benchmark::State& state) {
  manual_seed(0);
  examples::Mlp mlp;
  train_steps(state, mlp, rand({128, 784}), randint(0, 10, {128}), bench::mlp_step_flops(128));
}
BENCHMARK(BM_MlpStep)->ArgName("route")->Arg(1)->Arg(0)->UseRealTime()->Unit(benchmark::kMillisecond);

// The matrix products of the CNN step (forward, weight gradients, input gradients) with
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
  Eigen::setNbThreads(get_num_threads());  // Eigen's own threading: the raw baseline
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
  bench::report_flops(state, bench::cnn_step_flops(128));
}
BENCHMARK(BM_EigenCnnStepGemmsOnly)->UseRealTime()->Unit(benchmark::kMillisecond);

// The CNN's second convolution, forward and both gradients, through Kiln (autograd, the
// library route, reorders to and from NCHW), beside tests/bench/onednn/raw_layers.cpp's raw
// primitives for the same shapes.
void BM_KilnConv2dForwardBackward(benchmark::State& state) {
  manual_seed(0);
  const Tensor x = rand({128, 32, 14, 14}).as_leaf(true), w = (randn({64, 32, 3, 3}) * 0.1).as_leaf(true);
  const Tensor grad = randn({128, 64, 14, 14});
  auto pass = [&] { conv2d(x, w, {}, {1, 1}, {1, 1}).backward(grad); };
  pass();
  const StepCounters counters;
  for (auto _ : state) pass();
  counters.report(state);
  bench::report_flops(state, 3 * bench::conv_flops(128, 32, 64, 14, 14, 3));
}
BENCHMARK(BM_KilnConv2dForwardBackward)->UseRealTime()->Unit(benchmark::kMillisecond);

// The CNN's layers one at a time, beside a memcpy of the layer's input: pooling and the
// column copies (im2col) are memory-bound, so their floor is a pass over the bytes.

/// A memcpy of `count` floats: the floor of a memory-bound pass over that many.
void memcpy_floats(benchmark::State& state, std::size_t count) {
  std::vector<float> a(count, 1.0f), b(a.size());
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), a.size() * sizeof(float));
    benchmark::DoNotOptimize(b.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * a.size() * sizeof(float)));
}

void BM_MemcpyConv1Activation(benchmark::State& state) { memcpy_floats(state, 128 * 32 * 28 * 28); }
BENCHMARK(BM_MemcpyConv1Activation)->UseRealTime();

void BM_MaxPool2dConv1Activation(benchmark::State& state) {
  Tensor x = rand({128, 32, 28, 28});
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(max_pool2d(x, {2, 2}));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * x.numel() * 4));
}
BENCHMARK(BM_MaxPool2dConv1Activation)->UseRealTime();

// The CNN's conv1 forward (1 -> 32 channels, bias included), whose output is that activation:
// a thin convolution, bound by writing its output (core/cpu/conv_thin.cpp).
void BM_ThinConv2dForwardConv1(benchmark::State& state) {
  manual_seed(0);
  nn::Conv2d conv(1, 32, 3, nn::Conv2dOptions{.padding = {1, 1}});
  const Tensor x = rand({128, 1, 28, 28});
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(conv.forward(x));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 128 * 32 * 28 * 28 * 4));
}
BENCHMARK(BM_ThinConv2dForwardConv1)->UseRealTime();

// The pool's backward over the same activation: Kiln's kernel (one pass per plane), beside
// the zeros + scatter_add it replaced. Bytes are the input-sized gradient written.
void BM_MaxPool2dBackwardConv1Activation(benchmark::State& state) {
  const Tensor x = rand({128, 32, 28, 28});
  const auto [values, indices] = ops::max_pool2d_with_indices(x, ops::im2col_geometry(x.sizes(), {2, 2}, {1, 1}, {0, 0}, {2, 2}));
  const Tensor grad_output = rand(values.sizes());
  const bool composite = state.range(0) != 0;
  for (auto _ : state) {
    if (composite) {
      benchmark::DoNotOptimize(
          zeros({128 * 32, 28 * 28}).scatter_add(1, indices.view({128 * 32, -1}), grad_output.view({128 * 32, -1})));
    } else {
      benchmark::DoNotOptimize(ops::max_pool2d_with_indices_backward(grad_output, indices, x.sizes()));
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * x.numel() * 4));
}
BENCHMARK(BM_MaxPool2dBackwardConv1Activation)->ArgName("composite")->Arg(0)->Arg(1)->UseRealTime();

/// conv2's output in oneDNN's nChw16c blocks (dtype:0 Float32, dtype:1 BFloat16), relu'd and
/// pooled 2x2 into NCHW with a byte per window: what a compiled CNN step's fused
/// conv2d.forward_relu_max_pool does after the convolution.
struct PooledConv2Output {
  explicit PooledConv2Output(const benchmark::State& state)
      : dtype(state.range(0) == 0 ? kFloat32 : kBFloat16),
        blocked(randn({n, c / block, h, h, block}).to(dtype).view({-1})),
        layout{block, c * h * h, block * h * h, block * h, block, blocked.numel()},
        pool(ops::im2col_geometry({n, c, h, h}, {2, 2}, {1, 1}, {0, 0}, {2, 2})),
        values(empty({n, c, pool.out_h, pool.out_w}, TensorOptions().dtype(dtype))),
        records(empty(values.sizes(), TensorOptions().dtype(kUInt8))) {}
  void forward() const { cpu::max_pool2d_channel_blocked_kernel(values, records, blocked, layout, pool, /*relu=*/true); }
  static constexpr std::int64_t n = 128, c = 64, h = 14, block = 16;
  DType dtype;
  Tensor blocked;
  ChannelBlockedLayout layout;
  Im2ColGeometry pool;
  Tensor values, records;
};

// The pool, beside a memcpy of the same bytes (BM_MemcpyConv2Output).
void BM_MaxPool2dReluChannelBlockedConv2Output(benchmark::State& state) {
  const PooledConv2Output out(state);
  for (auto _ : state) out.forward();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * out.blocked.nbytes());
}
BENCHMARK(BM_MaxPool2dReluChannelBlockedConv2Output)->ArgName("dtype")->Arg(0)->Arg(1)->UseRealTime();

// Its backward: the pooled gradient unpooled through the records into the blocked layout
// conv2's backward primitives read (conv2d.backward_through_max_pool before them).
void BM_MaxPool2dBackwardReluChannelBlockedConv2Output(benchmark::State& state) {
  const PooledConv2Output out(state);
  out.forward();
  const Tensor grad_output = randn(out.values.sizes()).to(out.dtype), grad_input = empty_like(out.blocked);
  for (auto _ : state) {
    cpu::max_pool2d_backward_relu_channel_blocked_kernel(grad_input, out.layout, grad_output, out.records, Tensor(),
                                                         out.pool);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * grad_input.nbytes());
}
BENCHMARK(BM_MaxPool2dBackwardReluChannelBlockedConv2Output)->ArgName("dtype")->Arg(0)->Arg(1)->UseRealTime();

void BM_MemcpyConv2Output(benchmark::State& state) { memcpy_floats(state, 128 * 64 * 14 * 14); }
BENCHMARK(BM_MemcpyConv2Output)->UseRealTime();

void BM_Conv2dForward(benchmark::State& state) {
  manual_seed(0);
  const std::int64_t in = state.range(0), size = state.range(1);
  nn::Conv2d conv(in, 2 * in, 3, nn::Conv2dOptions{.padding = {1, 1}});
  Tensor x = rand({128, in, size, size});
  NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(conv.forward(x));
  bench::report_flops(state, bench::conv_flops(128, static_cast<double>(in), 2.0 * static_cast<double>(in),
                                               static_cast<double>(size), static_cast<double>(size), 3));
}
BENCHMARK(BM_Conv2dForward)->Args({16, 28})->Args({32, 14})->UseRealTime()->Unit(benchmark::kMillisecond);

// The MLP's SGD-momentum update (784-512-256-10: 535,818 parameters in six tensors): the
// fused one-pass kernel (core/cpu/sgd.cpp) against the composite rule of optim/sgd.cpp written
// out with the same ops, and a memcpy of the parameters as the unit (the update reads
// parameters, gradients and buffers and writes two of them: five passes' worth of bytes).
void sgd_update(benchmark::State& state, bool fused) {
  manual_seed(0);
  TensorList params, grads, buffers;
  for (const auto& [rows, cols] : {std::pair{512, 784}, {512, 1}, {256, 512}, {256, 1}, {10, 256}, {10, 1}}) {
    params.push_back(randn({rows, cols}).as_leaf());
    grads.push_back(randn({rows, cols}));
    params.back().mutable_grad() = grads.back();
    buffers.push_back(grads.back().clone());
  }
  optim::SGD sgd(params, optim::SGDOptions(0.01).momentum(0.9));
  sgd.step();  // the momentum buffers exist from here on
  NoGradGuard no_grad;
  for (auto _ : state) {
    if (fused) {
      sgd.step();
    } else {
      for (std::size_t i = 0; i < params.size(); ++i) {
        buffers[i].mul_(0.9).add_(grads[i], 1.0);
        params[i].add_(buffers[i], -0.01);
      }
    }
  }
  state.SetBytesProcessed(state.iterations() * 535'818 * static_cast<std::int64_t>(sizeof(float)));
}
void BM_SgdMomentumUpdateFused(benchmark::State& state) { sgd_update(state, true); }
void BM_SgdMomentumUpdateComposite(benchmark::State& state) { sgd_update(state, false); }
BENCHMARK(BM_SgdMomentumUpdateFused)->UseRealTime();
BENCHMARK(BM_SgdMomentumUpdateComposite)->UseRealTime();
void BM_MemcpyMlpParameters(benchmark::State& state) { memcpy_floats(state, 535'818); }
BENCHMARK(BM_MemcpyMlpParameters)->UseRealTime();

}  // namespace
