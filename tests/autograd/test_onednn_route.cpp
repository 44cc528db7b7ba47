// tests/autograd/test_onednn_route.cpp — the CPU's library route (oneDNN, core/onednn/)
// against the Eigen route, in every dtype oneDNN serves: the same values and gradients for
// convolutions of every geometry and matrix products of every layout; primitives cached so a
// repeated step builds none; shapes oneDNN cannot take fall back, counted. Skipped in a build
// without oneDNN.
// Read next: tests/autograd/test_op_kernel_route.cpp (the same route switch, Float64 references).
#include <gtest/gtest.h>

#include <functional>

#include "core/meta_allocations.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;

struct Result {
  Tensor out;
  TensorList grads;
};

/// fn on fresh leaves copied from `inputs` (in `dtype`), backpropagating a fixed seed, on the
/// library route or the Eigen route.
Result run(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, DType dtype, bool library) {
  backends::OpKernelsGuard route(DeviceType::CPU, library);
  TensorList leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.defined() ? t.to(dtype).as_leaf(true) : Tensor());
  Result r{fn(leaves), {}};
  manual_seed(11);
  r.out.backward(randn(r.out.sizes()).to(dtype));
  for (const Tensor& t : leaves) r.grads.push_back(t.defined() ? t.grad() : Tensor());
  return r;
}

/// Both routes agree within `tol` (relative to the values' scale) on the output and on every
/// input's gradient; in Float32 the routes differ only in the order of their additions.
void expect_routes_agree(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, DType dtype,
                         double tol) {
  const Result eigen = run(fn, inputs, dtype, false), library = run(fn, inputs, dtype, true);
  EXPECT_EQ(library.out.dtype(), dtype);
  EXPECT_TRUE(tensors_near(library.out.to(kFloat64), eigen.out.to(kFloat64), tol));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    if (inputs[i].defined()) {
      EXPECT_TRUE(tensors_near(library.grads[i].to(kFloat64), eigen.grads[i].to(kFloat64), tol));
    }
  }
}

/// The dtypes oneDNN serves on this CPU, with the tolerance of each.
std::vector<std::pair<DType, double>> served_dtypes() {
  std::vector<std::pair<DType, double>> d{{kFloat32, 1e-4}};
  if (backends::onednn_has_bf16()) d.emplace_back(kBFloat16, 4e-2);
  return d;
}

class OneDnnRoute : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backends::onednn_is_available()) GTEST_SKIP() << "Kiln was built without oneDNN";
  }
};

TEST_F(OneDnnRoute, ConvolutionsOfEveryGeometryMatchTheEigenRoute) {
  struct Geometry {
    const char* name;
    Shape input, weight;
    Pair stride, padding, dilation;
    std::int64_t groups;
    bool bias;
  };
  const Geometry geometries[] = {
      {"3x3, padding 1 (the examples' layers)", {4, 8, 14, 14}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {"one input channel (a thin input: Kiln's direct weight gradient)", {4, 1, 12, 12}, {8, 1, 3, 3}, {1, 1}, {1, 1},
       {1, 1}, 1, true},
      {"three channels, stride 2, dilation 2 (thin)", {2, 3, 13, 11}, {4, 3, 3, 3}, {2, 2}, {2, 1}, {2, 2}, 1, true},
      {"thin 3x3, 11 outputs: a block of 8 and 3 more, rows of 10 in chunks of 8", {2, 2, 9, 10}, {11, 2, 3, 3},
       {1, 1}, {1, 1}, {1, 1}, 1, true},
      {"stride 2, odd size: the right padding is smaller", {2, 3, 9, 7}, {4, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},
      {"stride 2 leaves the last row and column unread (thin)", {2, 1, 28, 28}, {4, 1, 3, 3}, {2, 2}, {0, 0},
       {1, 1}, 1, true},
      {"stride 3 leaves columns unread (negative right padding)", {2, 3, 8, 8}, {5, 3, 2, 2}, {3, 3}, {0, 0}, {1, 1}, 1, true},
      {"dilation 2, rectangular kernel", {2, 4, 11, 10}, {6, 4, 3, 2}, {1, 1}, {2, 1}, {2, 2}, 1, false},
      {"groups 2", {2, 8, 10, 10}, {6, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, true},
      {"depthwise", {2, 6, 9, 9}, {6, 1, 3, 3}, {2, 1}, {1, 0}, {1, 1}, 6, false},
      {"1x1", {3, 16, 5, 5}, {8, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
  };
  for (const auto& [dtype, tol] : served_dtypes()) {
    for (const Geometry& g : geometries) {
      SCOPED_TRACE(std::string(g.name) + " in " + scalar_type_name(dtype));
      manual_seed(1);
      const TensorList inputs{randn(g.input), randn(g.weight) * 0.3, g.bias ? randn({g.weight[0]}) : Tensor()};
      expect_routes_agree(
          [&](const TensorList& x) { return conv2d(x[0], x[1], x[2], g.stride, g.padding, g.dilation, g.groups); },
          inputs, dtype, tol);
    }
  }
}

TEST_F(OneDnnRoute, ThinConvolutionsInBFloat16MatchTheEigenRoute) {
  // A first layer under CPU autocast: Kiln's direct kernels in float, rounded once on store,
  // on every CPU (they do not need oneDNN's BFloat16 instructions).
  struct Geometry {
    const char* name;
    Shape input, weight;
    Pair stride, padding, dilation;
  };
  const Geometry geometries[] = {
      {"the CNN's conv1 (1 -> 32, 3x3, padding 1)", {3, 1, 28, 28}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"11 outputs, three channels, rows of 10", {2, 3, 9, 10}, {11, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}},
      {"stride 2, dilation 2", {2, 3, 13, 11}, {4, 3, 3, 3}, {2, 2}, {2, 1}, {2, 2}},
  };
  for (const Geometry& g : geometries) {
    SCOPED_TRACE(g.name);
    manual_seed(2);
    const TensorList inputs{randn(g.input), randn(g.weight) * 0.3, randn({g.weight[0]})};
    expect_routes_agree([&](const TensorList& x) { return conv2d(x[0], x[1], x[2], g.stride, g.padding, g.dilation); },
                        inputs, kBFloat16, 4e-2);
  }
}

TEST_F(OneDnnRoute, TheExamplesConvolutionRunsOnOneDnnWithoutFallingBack) {
  // Other geometries may meet only a reference kernel on some CPU and fall back (still
  // correct, as above); the layer every example trains must not.
  const backends::OneDnnStats before = backends::onednn_stats();
  manual_seed(5);
  const Tensor x = randn({8, 32, 14, 14}).as_leaf(true), w = randn({64, 32, 3, 3}).as_leaf(true);
  const Tensor b = randn({64}).as_leaf(true);  // nn::Conv2d's default: the bias is added in the forward primitive
  conv2d(x, w, b, {1, 1}, {1, 1}).sum().backward();
  EXPECT_GE(backends::onednn_stats().primitives_created, before.primitives_created + 3);  // three passes
  EXPECT_EQ(backends::onednn_stats().fallbacks, before.fallbacks);
}

TEST_F(OneDnnRoute, MatrixProductsOfEveryLayoutMatchTheEigenRoute) {
  struct Case {
    const char* name;
    std::function<Tensor(const TensorList&)> fn;
    TensorList inputs;
  };
  manual_seed(2);
  const Case cases[] = {
      {"mm", [](const TensorList& x) { return x[0].mm(x[1]); }, {randn({96, 80}), randn({80, 72})}},
      {"linear: x @ w.t() + b", [](const TensorList& x) { return linear(x[0], x[1], x[2]); },
       {randn({128, 100}), randn({70, 100}), randn({70})}},
      {"bmm", [](const TensorList& x) { return x[0].bmm(x[1]); }, {randn({3, 40, 50}), randn({3, 50, 60})}},
      {"matmul with a broadcast batch", [](const TensorList& x) { return matmul(x[0], x[1]); },
       {randn({4, 64, 48}), randn({48, 80})}},
      {"matmul, broadcast batch on the left", [](const TensorList& x) { return matmul(x[0], x[1]); },
       {randn({64, 48}), randn({3, 48, 80})}},
      {"transposed left operand", [](const TensorList& x) { return x[0].t().mm(x[1]); },
       {randn({90, 70}), randn({90, 64})}},
      // Attention's heads, [L, heads·head_dim] viewed as [heads, L, head_dim]: matrices that
      // interleave, packed before the product (Note [Matrices of a batch that interleave]).
      {"attention's Q·Kᵀ and P·V on interleaved heads",
       [](const TensorList& x) {
         auto heads = [](const Tensor& t) { return t.view({40, 8, 32}).transpose(0, 1); };
         const Tensor scores = heads(x[0]).bmm(heads(x[1]).transpose(1, 2));
         return scores.bmm(heads(x[2]));
       },
       {randn({40, 256}), randn({40, 256}), randn({40, 256})}},
  };
  for (const auto& [dtype, tol] : served_dtypes()) {
    const std::int64_t fallbacks = backends::onednn_stats().fallbacks;
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " in " + scalar_type_name(dtype));
      expect_routes_agree(c.fn, c.inputs, dtype, tol);
    }
    // Plain, transposed and broadcast Float32 operands all have optimised kernels.
    if (dtype == kFloat32) {
      EXPECT_EQ(backends::onednn_stats().fallbacks, fallbacks);
    }
  }
}

TEST_F(OneDnnRoute, ARepeatedStepBuildsNoPrimitive) {
  // A fixed thread count: the adaptive one backs off on a busy machine (ctest -j2), and a
  // primitive for the new count is a new cache entry, rightly.
  set_num_threads(get_num_threads());
  manual_seed(3);
  nn::Conv2d conv(3, 8, 3, nn::Conv2dOptions{.padding = {1, 1}});
  nn::Linear fc(8 * 6 * 6, 10);
  const Tensor x = randn({16, 3, 6, 6});
  auto step = [&] {
    Tensor loss = fc.forward(conv.forward(x).relu().flatten(1)).sum();
    loss.backward();
  };
  step();  // builds what the step needs
  const std::int64_t built = backends::onednn_stats().primitives_created;
  step();
  step();
  EXPECT_EQ(backends::onednn_stats().primitives_created, built);
}

TEST_F(OneDnnRoute, ALayoutWithOnlyAReferenceKernelFallsBackAndIsCounted) {
  // A row broadcast by expand has stride 0 along the rows: oneDNN has only its reference
  // matmul for that (0.1 GFLOP/s), Eigen's GEMM packs it. The result is the same; the counter
  // says it happened.
  manual_seed(4);
  const Tensor row = randn({1, 64}), b = randn({64, 64});
  const Tensor a = row.expand({64, 64});
  const std::int64_t before = backends::onednn_stats().fallbacks;
  const Tensor library = a.mm(b);
  EXPECT_GT(backends::onednn_stats().fallbacks, before);
  backends::OpKernelsGuard eigen(DeviceType::CPU, false);
  EXPECT_TRUE(tensors_near(library, a.contiguous().mm(b), 1e-5));
}

// Note [oneDNN's 32-bit sizes] in practice: on the meta device, standing for the CPU as
// memory::plan runs it, creating these primitives killed the process with SIGFPE inside
// oneDNN (issue 31: memory::plan at batch 2^32, whose weight gradient is a product with
// K = 2^32). They take the Eigen route now, counted.
TEST_F(OneDnnRoute, ShapesPastInt32TakeTheEigenRouteInsteadOfCrashingOneDnn) {
  const MetaStandsForGuard planning(DeviceType::CPU);
  const TensorOptions meta = TensorOptions().device(kMeta);
  const std::int64_t k = std::int64_t{1} << 32, rows = std::int64_t{1} << 31;
  const std::int64_t before = backends::onednn_stats().fallbacks;
  EXPECT_EQ(empty({512, k}, meta).mm(empty({k, 784}, meta)).sizes(), IntArrayRef({512, 784}));
  EXPECT_EQ(empty({k, 784}, meta).mm(empty({784, 512}, meta)).sizes(), IntArrayRef({k, 512}));
  // A convolution 2^31 rows high, forward and both gradients.
  const Tensor x = empty({1, 8, rows, 8}, meta.requires_grad(true));
  const Tensor w = empty({8, 8, 3, 3}, meta.requires_grad(true));
  const Tensor y = conv2d(x, w);
  EXPECT_EQ(y.sizes(), IntArrayRef({1, 8, rows - 2, 6}));
  y.sum().backward();
  EXPECT_EQ(x.grad().sizes(), x.sizes());
  EXPECT_EQ(w.grad().sizes(), w.sizes());
  EXPECT_GE(backends::onednn_stats().fallbacks, before + 5);
}

TEST_F(OneDnnRoute, Float64StaysOnTheEigenRouteUncounted) {
  const std::int64_t before = backends::onednn_stats().fallbacks;
  const Tensor x = randn({2, 3, 8, 8}, kFloat64), w = randn({4, 3, 3, 3}, kFloat64);
  const Tensor y = conv2d(x, w);
  const Tensor z = randn({70, 70}, kFloat64).mm(randn({70, 70}, kFloat64));
  EXPECT_EQ(backends::onednn_stats().fallbacks, before);
  EXPECT_EQ(y.dtype(), kFloat64);
}

}  // namespace
}  // namespace kiln
