// tests/bench/onednn/raw_layers.cpp — the CNN step's layers as raw oneDNN primitives, linked
// into bench_training where oneDNN is built, so Kiln's step is measured beside what the
// library itself reaches in the same run:
//   - BM_OneDnnCnnLayers: every convolution pass and matrix product of the step, each on the
//     layout its primitive prefers (no reorders): the library's floor for the step's FLOPs;
//     BM_OneDnnMlpGemms, the MLP step's matrix products;
//   - BM_CnnStepCompiledOverLayers and BM_MlpStepCompiledOverGemms: Kiln's compiled steps and
//     those floors timed turn by turn, for their ratio (tests/bench/interleaved.h);
//   - BM_OneDnnConv2dForwardBackward: the second convolution's three passes, on the blocked
//     layouts alone (layout:0), and from and to NCHW with the reorders a framework pays at its
//     op boundaries (layout:1): Kiln's BM_KilnConv2dForwardBackward is measured against these;
//   - BM_Conv2WeightGradientBFloat16PairsOverOneDnn: that convolution's BFloat16 weight and bias
//     gradients from activations in channel blocks, as a compiled step holds them, by Kiln's pair
//     kernel and by oneDNN's primitive, turn by turn (Note [A weight gradient in BFloat16 pairs]).
// Read next: core/onednn/conv.cpp.
#include <benchmark/benchmark.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "../../../examples/support/models.h"
#include "core/cpu/channel_blocks.h"
#include "core/cpu/conv_weight_gradient_pairs.h"
#include "core/ops/conv.h"
#include "../interleaved.h"
#include "../step_flops.h"
#include "../training_step.h"

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

const dnnl::engine& engine() {
  static const dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

/// A memory object of `desc`, filled with small values.
memory filled(const memory::desc& desc) {
  memory m(desc, engine());
  float* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < desc.get_size() / sizeof(float); ++i) p[i] = static_cast<float>(i % 13) * 0.01f;
  return m;
}

/// The three passes of a 3x3, padding-1 convolution [n, c, h, h] -> [n, o, h, h], each with
/// its arguments in the layouts its primitive chose, and the reorders that bring them from
/// and to NCHW (what Kiln's kernels do around each pass, Note [Layouts at op boundaries]).
class RawConvolution {
 public:
  RawConvolution(memory::dim n, memory::dim c, memory::dim o, memory::dim h) {
    const memory::dims src{n, c, h, h}, weights{o, c, 3, 3}, dst{n, o, h, h}, one{1, 1};
    const auto f32 = memory::data_type::f32;
    const memory::desc any_src(src, f32, Tag::any), any_weights(weights, f32, Tag::any), any_dst(dst, f32, Tag::any);
    const dnnl::convolution_forward::primitive_desc forward(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, any_src, any_weights, any_dst, one,
         {0, 0}, one, one},
        engine());
    const dnnl::convolution_backward_data::primitive_desc data(
        {dnnl::algorithm::convolution_direct, any_src, any_weights, any_dst, one, {0, 0}, one, one}, engine(), forward);
    const dnnl::convolution_backward_weights::primitive_desc weight(
        {dnnl::algorithm::convolution_direct, any_src, any_weights, any_dst, one, {0, 0}, one, one}, engine(), forward);
    const memory plain_src = filled({src, f32, Tag::nchw}), plain_weights = filled({weights, f32, Tag::oihw}),
                 plain_dst = filled({dst, f32, Tag::nchw});
    passes_.push_back({dnnl::convolution_forward(forward),
                       {arg(DNNL_ARG_SRC, plain_src, forward.src_desc(), false),
                        arg(DNNL_ARG_WEIGHTS, plain_weights, forward.weights_desc(), false),
                        arg(DNNL_ARG_DST, plain_dst, forward.dst_desc(), true)}});
    passes_.push_back({dnnl::convolution_backward_data(data),
                       {arg(DNNL_ARG_DIFF_DST, plain_dst, data.diff_dst_desc(), false),
                        arg(DNNL_ARG_WEIGHTS, plain_weights, data.weights_desc(), false),
                        arg(DNNL_ARG_DIFF_SRC, plain_src, data.diff_src_desc(), true)}});
    passes_.push_back({dnnl::convolution_backward_weights(weight),
                       {arg(DNNL_ARG_SRC, plain_src, weight.src_desc(), false),
                        arg(DNNL_ARG_DIFF_DST, plain_dst, weight.diff_dst_desc(), false),
                        arg(DNNL_ARG_DIFF_WEIGHTS, plain_weights, weight.diff_weights_desc(), true)}});
  }
  /// Runs pass i (0 forward, 1 backward-data, 2 backward-weights), with its reorders when
  /// `from_nchw`.
  void run(int i, dnnl::stream& s, bool from_nchw) {
    Pass& p = passes_[static_cast<std::size_t>(i)];
    std::unordered_map<int, memory> args;
    for (Argument& a : p.arguments) {
      args[a.id] = a.wanted;
      if (from_nchw && a.reorder && !a.is_output) a.reorder->execute(s, a.plain, a.wanted);
    }
    p.primitive.execute(s, args);
    for (Argument& a : p.arguments) {
      if (from_nchw && a.reorder && a.is_output) a.reorder->execute(s, a.wanted, a.plain);
    }
  }

 private:
  struct Argument {
    int id;
    memory plain, wanted;
    std::optional<dnnl::reorder> reorder;
    bool is_output;
  };
  struct Pass {
    dnnl::primitive primitive;
    std::vector<Argument> arguments;
  };
  static Argument arg(int id, const memory& plain, const memory::desc& wanted, bool is_output) {
    Argument a{id, plain, filled(wanted), std::nullopt, is_output};
    if (wanted != plain.get_desc()) a.reorder = is_output ? dnnl::reorder(a.wanted, plain) : dnnl::reorder(plain, a.wanted);
    return a;
  }
  std::vector<Pass> passes_;
};

/// dnnl_sgemm on row-major buffers: c[m, n] = a[m, k] b[k, n].
struct RawGemm {
  RawGemm(memory::dim m, memory::dim k, memory::dim n)
      : m(m), k(k), n(n), a(static_cast<std::size_t>(m * k), 0.5f), b(static_cast<std::size_t>(k * n), 0.25f),
        c(static_cast<std::size_t>(m * n)) {}
  void run() { dnnl_sgemm('N', 'N', m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n); }
  memory::dim m, k, n;
  std::vector<float> a, b, c;
};

/// Every convolution pass and matrix product of the CNN step, each on the layout its primitive
/// prefers: conv1's forward and weight gradient (the images need no gradient), conv2's three
/// passes, and fc1's and fc2's forward and both gradients.
class CnnLayers {
 public:
  CnnLayers() : conv1_(128, 1, 32, 28), conv2_(128, 32, 64, 14) {
    for (auto [m, k, n] : {std::array<memory::dim, 3>{128, 3136, 128}, {128, 128, 3136}, {128, 128, 3136},
                           {128, 128, 10}, {10, 128, 128}, {128, 10, 128}}) {
      gemms_.emplace_back(m, k, n);
    }
  }
  void run() {
    conv1_.run(0, stream_, false);
    conv1_.run(2, stream_, false);
    for (int pass = 0; pass < 3; ++pass) conv2_.run(pass, stream_, false);
    for (RawGemm& g : gemms_) g.run();
    stream_.wait();
  }

 private:
  dnnl::stream stream_{engine()};
  RawConvolution conv1_, conv2_;
  std::vector<RawGemm> gemms_;
};

/// The MLP step's matrix products (784-512-256-10, batch 128): three forward, two
/// backward-data (the input needs no gradient) and three backward-weight GEMMs.
class MlpGemms {
 public:
  MlpGemms() {
    for (auto [m, k, n] : {std::array<memory::dim, 3>{128, 784, 512}, {128, 512, 256}, {128, 256, 10},
                           {128, 10, 256}, {128, 256, 512},
                           {10, 128, 256}, {256, 128, 512}, {512, 128, 784}}) {
      gemms_.emplace_back(m, k, n);
    }
  }
  void run() {
    for (RawGemm& g : gemms_) g.run();
  }

 private:
  std::vector<RawGemm> gemms_;
};

void BM_OneDnnCnnLayers(benchmark::State& state) {
  CnnLayers layers;
  for (auto _ : state) layers.run();
  kiln::bench::report_flops(state, kiln::bench::cnn_step_flops(128));
}
BENCHMARK(BM_OneDnnCnnLayers)->UseRealTime()->Unit(benchmark::kMillisecond);

// The MLP step's matrix products alone, each on oneDNN's own GEMM: the floor
// BM_MlpStepCompiled is measured against.
void BM_OneDnnMlpGemms(benchmark::State& state) {
  MlpGemms gemms;
  for (auto _ : state) gemms.run();
  kiln::bench::report_flops(state, kiln::bench::mlp_step_flops(128));
}
BENCHMARK(BM_OneDnnMlpGemms)->UseRealTime()->Unit(benchmark::kMillisecond);

// The compiled steps and their floors timed turn by turn (Note [Ratios timed turn by turn] in
// tests/bench/interleaved.h), for the ratios the compiled steps are held to: the CNN step over
// its layers, the MLP step over its GEMMs.
template <class Model, class Floor>
void compiled_step_over(benchmark::State& state, const kiln::Shape& input, const std::string& floor_name) {
  kiln::manual_seed(0);
  Model model;
  kiln::bench::SgdTrainingStep step(model, kiln::rand(input), kiln::randint(0, 10, {input[0]}), {.compiled = true});
  Floor floor;
  kiln::bench::run_interleaved(state, [&] { step(); }, [&] { floor.run(); }, "compiled", floor_name);
}

void BM_CnnStepCompiledOverLayers(benchmark::State& state) {
  compiled_step_over<kiln::examples::Cnn, CnnLayers>(state, {128, 1, 28, 28}, "layers");
}
BENCHMARK(BM_CnnStepCompiledOverLayers)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_MlpStepCompiledOverGemms(benchmark::State& state) {
  compiled_step_over<kiln::examples::Mlp, MlpGemms>(state, {128, 784}, "gemms");
}
BENCHMARK(BM_MlpStepCompiledOverGemms)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_OneDnnConv2dForwardBackward(benchmark::State& state) {
  dnnl::stream s(engine());
  RawConvolution conv(128, 32, 64, 14);
  const bool from_nchw = state.range(0) != 0;
  for (auto _ : state) {
    for (int pass = 0; pass < 3; ++pass) conv.run(pass, s, from_nchw);
    s.wait();
  }
  kiln::bench::report_flops(state, 3 * kiln::bench::conv_flops(128, 32, 64, 14, 14, 3));
}
BENCHMARK(BM_OneDnnConv2dForwardBackward)->ArgName("layout")->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Conv2WeightGradientBFloat16PairsOverOneDnn(benchmark::State& state) {
  using namespace kiln;
  constexpr std::int64_t n = 128, c = 32, o = 64, h = 14;
  manual_seed(0);
  const Tensor input = relu(randn({n, c / 16, h, h, 16})).to(kBFloat16);
  const Tensor grad_output = randn({n, o / 16, h, h, 16}).to(kBFloat16);
  const Tensor grad_weight = empty({o, c, 3, 3}, TensorOptions().dtype(kBFloat16));
  const Tensor grad_bias = empty({o}, TensorOptions().dtype(kBFloat16));
  const Im2ColGeometry g = ops::im2col_geometry({n, c, h, h}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  const ChannelBlockedLayout input_layout = cpu::dense_channel_blocks(n, c, h, h, 16);
  const ChannelBlockedLayout grad_layout = cpu::dense_channel_blocks(n, o, h, h, 16);
  const auto pairs = [&] {
    return cpu::conv2d_weight_gradient_in_pairs(grad_weight, grad_bias, grad_output, grad_layout, input, input_layout,
                                                g);
  };
  if (!pairs()) return state.SkipWithError("the pair kernel does not serve this CPU or build");

  // oneDNN's primitive on the same blocked buffers (nChw16c), its weight gradient in the layout it chooses.
  const auto bf16 = memory::data_type::bf16;
  const memory::dims src{n, c, h, h}, weights{o, c, 3, 3}, dst{n, o, h, h}, one{1, 1};
  const memory::desc blocked_src(src, bf16, Tag::nChw16c), blocked_dst(dst, bf16, Tag::nChw16c);
  const memory::desc any_weights(weights, bf16, Tag::any), bias({o}, bf16, Tag::a);
  const dnnl::convolution_forward::primitive_desc forward(
      {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, blocked_src, any_weights, bias,
       blocked_dst, one, one, one},
      engine());
  const dnnl::convolution_backward_weights::primitive_desc weight(
      {dnnl::algorithm::convolution_direct, blocked_src, any_weights, bias, blocked_dst, one, one, one}, engine(),
      forward);
  const dnnl::convolution_backward_weights primitive(weight);
  dnnl::stream s(engine());
  const memory src_memory(blocked_src, engine(), input.raw_data_ptr());
  const memory dst_memory(blocked_dst, engine(), grad_output.raw_data_ptr());
  const memory weights_memory(weight.diff_weights_desc(), engine()), bias_memory(bias, engine());
  const auto onednn = [&] {
    primitive.execute(s, {{DNNL_ARG_SRC, src_memory}, {DNNL_ARG_DIFF_DST, dst_memory},
                          {DNNL_ARG_DIFF_WEIGHTS, weights_memory}, {DNNL_ARG_DIFF_BIAS, bias_memory}});
    s.wait();
  };
  bench::run_interleaved(state, [&] { pairs(); }, onednn, "pairs", "onednn");
}
BENCHMARK(BM_Conv2WeightGradientBFloat16PairsOverOneDnn)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
