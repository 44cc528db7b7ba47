// tests/autograd/test_softmax.cpp — the fused softmax and log-softmax (core/cpu/softmax.cpp)
// against the same functions composed from ops in Float64, in every layout the kernel sees;
// their nodes' names; masked, infinite and empty rows. gradcheck and gradgradcheck run from
// the op table (softmax, softmax_middle_dim, log_softmax, log_softmax_transposed).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops/softmax.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;
using testing::values;

Tensor composed(const Tensor& x, std::int64_t dim, bool log) {
  NoGradGuard no_grad;
  const Tensor shifted = x - x.amax(dim, true);
  const Tensor sum = shifted.exp().sum(dim, true);
  return log ? shifted - sum.log() : shifted.exp() / sum;
}

Tensor composed_backward(const Tensor& g, const Tensor& y, std::int64_t dim, bool log) {
  NoGradGuard no_grad;
  return log ? g - y.exp() * g.sum(dim, true) : y * (g - (g * y).sum(dim, true));
}

TEST(FusedSoftmax, MatchesTheComposedOpsInEveryLayout) {
  manual_seed(11);
  struct Case {
    Tensor x;
    std::int64_t dim;
  };
  const Tensor cube = randn({3, 5, 7}, TensorOptions().dtype(kFloat64)) * 3.0;
  const std::vector<Case> cases{{cube, -1}, {cube, 1}, {cube, 0},                 // rows, middle, first
                                {cube.transpose(0, 2), -1},                        // non-contiguous
                                {randn({2, 1000}, TensorOptions().dtype(kFloat64)), 1},
                                {randn({4}, TensorOptions().dtype(kFloat64)), 0}};
  for (const Case& c : cases) {
    ASSERT_TRUE(ops::can_fuse_softmax(c.x));
    for (bool log : {false, true}) {
      const Tensor y = ops::softmax(c.x, c.dim, log);
      EXPECT_TRUE(tensors_near(y, composed(c.x, c.dim, log), 1e-14)) << c.x.sizes() << " dim " << c.dim << log;
      const Tensor g = randn(c.x.sizes(), TensorOptions().dtype(kFloat64));
      EXPECT_TRUE(tensors_near(ops::softmax_backward(g, y, c.dim, log), composed_backward(g, y, c.dim, log), 1e-14))
          << c.x.sizes() << " dim " << c.dim << log;
    }
  }
}

TEST(FusedSoftmax, NodesHavePyTorchsNames) {
  const Tensor x = randn({2, 3}).as_leaf();
  EXPECT_STREQ(x.softmax(1).grad_fn()->name(), "SoftmaxBackward0");
  EXPECT_STREQ(x.log_softmax(1).grad_fn()->name(), "LogSoftmaxBackward0");
}

TEST(FusedSoftmax, BackwardThroughTheNodeEqualsTheFormula) {
  manual_seed(4);
  for (bool log : {false, true}) {
    const Tensor x = randn({6, 9}, TensorOptions().dtype(kFloat64)).as_leaf();
    const Tensor g = randn({6, 9}, TensorOptions().dtype(kFloat64));
    const Tensor y = log ? x.log_softmax(0) : x.softmax(0);
    y.backward(g);
    EXPECT_TRUE(tensors_near(x.grad(), composed_backward(g, y.detach(), 0, log), 1e-14));
  }
}

TEST(FusedSoftmax, MaskedLargeInfiniteAndEmptyRows) {
  const double inf = std::numeric_limits<double>::infinity();
  // A causal row: the masked keys get exactly 0 (log: -inf), the rest share the mass.
  const Tensor masked = tensor(std::vector<double>{0.5, -inf, -inf, 1.0, 1.0, -inf}, {2, 3});
  EXPECT_EQ(values(masked.softmax(1)), (std::vector<double>{1, 0, 0, 0.5, 0.5, 0}));
  const std::vector<double> log_masked = values(masked.log_softmax(1));
  EXPECT_EQ(log_masked[1], -inf);
  EXPECT_NEAR(log_masked[3], std::log(0.5), 1e-7);
  // exp(1000) overflows; exp(x - max) does not.
  EXPECT_TRUE(testing::values_near(tensor(std::vector<double>{1000.0, 1000.0}, {2}).softmax(0), {0.5, 0.5}));
  EXPECT_TRUE(testing::values_near(tensor(std::vector<double>{1000.0, 1000.0}, {2}).log_softmax(0), {-std::log(2.0), -std::log(2.0)}));
  // A row of -inf has no distribution: NaN, as in PyTorch.
  const Tensor none = full({3}, -inf);
  for (double v : values(none.softmax(0))) EXPECT_TRUE(std::isnan(v));
  for (double v : values(none.log_softmax(0))) EXPECT_TRUE(std::isnan(v));
  // An empty dim, and a zero-dim tensor (a single element: probability 1).
  EXPECT_EQ(zeros({4, 0}).softmax(1).sizes(), (Shape{4, 0}));
  EXPECT_EQ(values(tensor(3.0).softmax(0)), (std::vector<double>{1}));
}

TEST(FusedSoftmax, Float32SumsAsAccuratelyAsFloat64RoundsThem) {
  manual_seed(8);
  // One long row: a float sum would drift by up to n ε; the kernel's double sum does not. The
  // values are multiples of 1/256 at most 0, and one is 0, so x - max is exact and what is
  // left is exp's rounding, the sum's and the division's.
  Tensor x = randint(-1280, 1, {1, 1 << 18}).to(kFloat32) / 256.0;
  x.narrow(1, 0, 1).fill_(0.0);
  const Tensor p = x.softmax(1), p64 = x.to(kFloat64).softmax(1);
  const double worst = (p.to(kFloat64) - p64).abs().div(p64).amax().item<double>();
  EXPECT_LE(worst, 4 * std::numeric_limits<float>::epsilon());
}

}  // namespace
}  // namespace kiln
