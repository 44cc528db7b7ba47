// native_batch_norm is batch_norm through the backend's batch-norm kernels (cuDNN on CUDA).
// On the CPU its reference kernels must agree with the composite batch_norm in everything a
// training step sees: the output, the running statistics, the saved statistics, and the
// gradients of the input and the affine parameters.
#include <gtest/gtest.h>

#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;
using testing::values_near;

TEST(NativeBatchNorm, MatchesCompositeBatchNormAndItsRunningStatistics) {
  manual_seed(0);
  const Tensor x = randn({4, 3, 2, 2}, kFloat64);
  const Tensor w = tensor({1.0, 0.5, 2.0}, kFloat64).as_leaf(true), b = tensor({0.0, 0.1, -0.1}, kFloat64).as_leaf(true);
  Tensor mean_native = zeros({3}, kFloat64), var_native = ones({3}, kFloat64);
  Tensor mean_composite = zeros({3}, kFloat64), var_composite = ones({3}, kFloat64);
  const std::uint32_t version = mean_native._version();

  auto [out, save_mean, save_invstd] = native_batch_norm(x, w, b, mean_native, var_native, true, 0.1, 1e-5);
  const Tensor expected = batch_norm(x, mean_composite, var_composite, w, b, true, 0.1, 1e-5);
  EXPECT_TRUE(tensors_near(out, expected, 1e-12));
  EXPECT_TRUE(tensors_near(mean_native, mean_composite, 1e-12));
  EXPECT_TRUE(tensors_near(var_native, var_composite, 1e-12));  // unbiased, n / (n - 1) with n = 16
  EXPECT_GT(mean_native._version(), version);  // written in place

  // save_mean is the batch mean, save_invstd 1 / sqrt(biased var + eps); neither has a history.
  EXPECT_TRUE(tensors_near(save_mean, x.mean({0, 2, 3}), 1e-12));
  EXPECT_TRUE(tensors_near(save_invstd, (x.var({0, 2, 3}, false) + 1e-5).rsqrt(), 1e-12));
  EXPECT_FALSE(save_mean.requires_grad());
  EXPECT_EQ(std::string(out.grad_fn()->name()), "NativeBatchNormBackward0");
}

TEST(NativeBatchNorm, GradientsMatchTheCompositeWithAndWithoutAffineParameters) {
  manual_seed(1);
  const Tensor data = randn({5, 2, 3}, kFloat64);
  const Tensor gy = randn({5, 2, 3}, kFloat64);
  for (bool affine : {true, false}) {
    SCOPED_TRACE(affine ? "affine" : "no affine");
    const Tensor x1 = data.as_leaf(true), x2 = data.as_leaf(true);
    const Tensor w1 = affine ? tensor({1.5, -0.5}, kFloat64).as_leaf(true) : Tensor();
    const Tensor w2 = affine ? tensor({1.5, -0.5}, kFloat64).as_leaf(true) : Tensor();
    const Tensor b1 = affine ? tensor({0.2, 0.3}, kFloat64).as_leaf(true) : Tensor();
    const Tensor b2 = affine ? tensor({0.2, 0.3}, kFloat64).as_leaf(true) : Tensor();
    std::get<0>(native_batch_norm(x1, w1, b1, {}, {}, true)).backward(gy);
    batch_norm(x2, {}, {}, w2, b2, true).backward(gy);
    EXPECT_TRUE(tensors_near(x1.grad(), x2.grad(), 1e-10));
    if (affine) {
      EXPECT_TRUE(tensors_near(w1.grad(), w2.grad(), 1e-10));
      EXPECT_TRUE(tensors_near(b1.grad(), b2.grad(), 1e-10));
    }
  }
}

TEST(NativeBatchNorm, EvaluationIsBatchNormWithEmptyStatistics) {
  const Tensor x = tensor({1.0, 2.0, 3.0, 6.0, 5.0, 10.0}).view({3, 2});
  auto [out, save_mean, save_invstd] =
      native_batch_norm(x, {}, {}, tensor({1.0, 2.0}), tensor({4.0, 1.0}), false, 0.1, 1e-5);
  EXPECT_TRUE(values_near(out, {0, 0, 0.99999875, 3.9999800001, 1.9999975, 7.9999600003}));
  EXPECT_EQ(save_mean.numel(), 0);
  EXPECT_EQ(save_invstd.numel(), 0);
}

TEST(NativeBatchNorm, StatisticsOfTheWrongDtypeAreRefusedWithTheDtypeExpected) {
  const Tensor x = ones({2, 2}, kFloat16);
  EXPECT_ERROR(native_batch_norm(x, ones({2}, kFloat16), {}, {}, {}, true),
               "expected weight to have dtype Float for a Half input, but got Half");
  EXPECT_ERROR(native_batch_norm(ones({2, 3}), ones({2}), {}, {}, {}, true), "expected weight of size [3]");
}

}  // namespace
}  // namespace kiln
