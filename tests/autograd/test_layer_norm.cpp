// tests/autograd/test_layer_norm.cpp — the fused layer norm (core/cpu/layer_norm.cpp) against
// the same function composed from ops in Float64, with and without weight and bias; its node's
// name; the statistics of rows far from zero; the weight gradient's sum, the same on any thread
// count; parameters of the wrong shape. gradcheck and gradgradcheck run from the op
// table (layer_norm, layer_norm_two_dims_plain, layer_norm_transposed_weight_only).
#include <gtest/gtest.h>

#include "core/ops/layer_norm.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;

/// The composed formula and its gradients, through autograd on differentiable ops.
TensorList composed(const Tensor& x, const Tensor& w, const Tensor& b, const Shape& dims, const Tensor& g) {
  const Tensor xl = x.detach().as_leaf();
  const Tensor wl = w.defined() ? w.detach().as_leaf() : Tensor();
  const Tensor bl = b.defined() ? b.detach().as_leaf() : Tensor();
  Tensor y = (xl - xl.mean(dims, true)) / (xl.var(dims, false, true) + 1e-5).sqrt();
  if (wl.defined()) y = y * wl;
  if (bl.defined()) y = y + bl;
  y.backward(g);
  return {y.detach(), xl.grad(), wl.defined() ? wl.grad() : Tensor(), bl.defined() ? bl.grad() : Tensor()};
}

TEST(FusedLayerNorm, MatchesTheComposedOpsWithAndWithoutAffine) {
  manual_seed(21);
  const TensorOptions f64 = TensorOptions().dtype(kFloat64);
  const Tensor x = randn({4, 5, 6}, f64) * 2.0 + 3.0;
  for (const Shape& shape : {Shape{6}, Shape{5, 6}}) {
    Shape dims;
    for (std::size_t i = 0; i < shape.size(); ++i) dims.push_back(static_cast<std::int64_t>(3 - shape.size() + i));
    for (bool affine : {false, true}) {
      const Tensor w = affine ? randn(shape, f64).as_leaf() : Tensor();
      const Tensor b = affine ? randn(shape, f64).as_leaf() : Tensor();
      const Tensor xl = x.as_leaf();
      const Tensor g = randn(x.sizes(), f64);
      const Tensor y = layer_norm(xl, shape, w, b);
      ASSERT_STREQ(y.grad_fn()->name(), "NativeLayerNormBackward0");
      y.backward(g);
      const TensorList want = composed(x, w, b, dims, g);
      EXPECT_TRUE(tensors_near(y, want[0], 1e-13)) << shape << affine;
      EXPECT_TRUE(tensors_near(xl.grad(), want[1], 1e-12)) << shape << affine;
      if (affine) {
        EXPECT_TRUE(tensors_near(w.grad(), want[2], 1e-12)) << shape;
        EXPECT_TRUE(tensors_near(b.grad(), want[3], 1e-12)) << shape;
      }
    }
  }
}

TEST(FusedLayerNorm, RowsFarFromZeroKeepTheirVariance) {
  // Mean 1e4, spread 1: a one-pass E[x²] - E[x]² in Float32 would lose every bit of it.
  manual_seed(2);
  const Tensor x = randn({8, 512}) + 1e4;
  const Tensor y = layer_norm(x, {512}), y64 = layer_norm(x.to(kFloat64), {512});
  EXPECT_TRUE(tensors_near(y, y64, 1e-3));
}

TEST(FusedLayerNorm, TheWeightGradientIsTheSameOnAnyThreadCountAndWithinTheCascadesBound) {
  // The kernel adds dy · x̂ a block of rows at a time inside its row pass, blocks split among
  // the threads, then the blocks' sums in a fixed order (Note [One pass per layer-norm row]):
  // the same bits on one thread and on two, with a last block cut short, and as close to the
  // exact sum as Kiln's cascade promises (Note [How Kiln sums]).
  const int threads = get_num_threads();
  for (const std::int64_t rows : {1024, 1000, 31}) {
    manual_seed(rows);
    const Tensor x = randn({rows, 77}) * 3.0 + 1.0, w = randn({77}), g = randn({rows, 77});
    const auto [y, mean, rstd] = ops::native_layer_norm(x, 77, w, Tensor(), 1e-5);
    auto weight_gradient = [&](int n) {
      set_num_threads(n);
      return std::get<1>(ops::native_layer_norm_backward(g, x, mean, rstd, w, Tensor(), {true, true, false}));
    };
    const Tensor on_one = weight_gradient(1), on_two = weight_gradient(2);
    EXPECT_TRUE(equal(on_one, on_two)) << rows << " rows";
    const Tensor products = g.to(kFloat64) * ((x - mean.unsqueeze(1)) * rstd.unsqueeze(1)).to(kFloat64);
    const double bound = 32 * 0x1p-24 * products.abs().sum({0}).max().item<double>();
    EXPECT_LE((on_one.to(kFloat64) - products.sum({0})).abs().max().item<double>(), bound) << rows << " rows";
  }
  set_num_threads(threads);
}

TEST(FusedLayerNorm, RowsTakenTogetherKeepEachRowsOwnBits) {
  // The forward takes a few rows through each step at once (Note [Rows in flight]): every row,
  // in a group or in the short group at the end, gets the bits it gets alone, on any thread
  // count.
  const int threads = get_num_threads();
  for (const DType dtype : {kFloat32, kFloat64}) {
    manual_seed(7);
    const TensorOptions options = TensorOptions().dtype(dtype);
    const Tensor x = randn({11, 131}, options) * arange(1.0, 12.0, 1.0, options).unsqueeze(1) + 5.0;
    const Tensor w = randn({131}, options), b = randn({131}, options);
    for (const int n : {1, 2}) {
      set_num_threads(n);
      const auto [y, mean, rstd] = ops::native_layer_norm(x, 131, w, b, 1e-5);
      for (std::int64_t r = 0; r < 11; ++r) {
        const auto [y_row, mean_row, rstd_row] = ops::native_layer_norm(x.narrow(0, r, 1), 131, w, b, 1e-5);
        EXPECT_TRUE(equal(y.narrow(0, r, 1), y_row)) << dtype << " row " << r << " on " << n << " threads";
        EXPECT_TRUE(equal(mean.narrow(0, r, 1), mean_row)) << dtype << " row " << r;
        EXPECT_TRUE(equal(rstd.narrow(0, r, 1), rstd_row)) << dtype << " row " << r;
      }
    }
  }
  set_num_threads(threads);
}

TEST(FusedLayerNorm, ParametersOfAnotherDtypeTakeTheComposedRoute) {
  const Tensor x = randn({2, 3});
  EXPECT_TRUE(ops::can_fuse_layer_norm(x, 3, {}, {}));
  EXPECT_FALSE(ops::can_fuse_layer_norm(x, 3, ones({3}, TensorOptions().dtype(kFloat64)), {}));
  EXPECT_FALSE(ops::can_fuse_layer_norm(x.to(kBFloat16), 3, {}, {}));
}

TEST(FusedLayerNorm, ParametersOfAnotherShapeAreAnError) {
  // PyTorch checks the parameters' exact shape, so a [6] weight for normalized_shape {2, 3}
  // is an error on every route, not a broadcast on the composed one.
  const Tensor x = randn({4, 2, 3});
  EXPECT_ERROR(layer_norm(x, {2, 3}, ones({6})),
               "Expected weight to be of same shape as normalized_shape, but got weight of shape [6]");
  EXPECT_ERROR(layer_norm(x.to(kFloat16), {2, 3}, {}, zeros({3})),
               "Expected bias to be of same shape as normalized_shape, but got bias of shape [3]");
}

}  // namespace
}  // namespace kiln
