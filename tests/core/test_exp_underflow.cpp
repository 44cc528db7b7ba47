// tests/core/test_exp_underflow.cpp — exp of what underflows is 0 on every route that takes
// Eigen's vectorised exp (core/cpu/eigen_exp.h): the exp op, softmax and log-softmax forward
// and backward, and the fused attention's probabilities, in rows long enough to be vectorised.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/test_util.h"

namespace kiln {
namespace {

using testing::values;

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A [rows, 64] row of zeros with the keys from `first_masked` on set to -inf.
Tensor masked_rows(std::int64_t rows, std::int64_t first_masked, DType dtype) {
  return masked_fill(zeros({rows, 64}, TensorOptions().dtype(dtype)), arange(64) >= first_masked, -kInf);
}

TEST(ExpUnderflow, ExpOfMinusInfinityAndOfWhatUnderflowsIsZero) {
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(scalar_type_name(dtype));
    const Tensor x = full({64}, -kInf, TensorOptions().dtype(dtype));
    x.narrow(0, 0, 16).fill_(-800.0);
    x.narrow(0, 16, 16).fill_(-1e30);
    for (double v : values(x.exp())) EXPECT_EQ(v, 0.0);
  }
  // What does not underflow keeps its value, next to values that do.
  const Tensor x = full({32}, -kInf, TensorOptions().dtype(kFloat64));
  x.narrow(0, 0, 8).fill_(-700.0);
  EXPECT_EQ(values(x.exp())[0], std::exp(-700.0));
}

TEST(ExpUnderflow, MaskedKeysGetExactlyZeroProbabilityAndGradient) {
  for (DType dtype : {kFloat32, kFloat64}) {
    SCOPED_TRACE(scalar_type_name(dtype));
    const Tensor scores = masked_rows(3, 20, dtype);
    const std::vector<double> p = values(scores.softmax(1)), log_p = values(scores.log_softmax(1));
    // Along a dim that is not the last (the kernel's other layout).
    const std::vector<double> p_columns = values(scores.t().contiguous().softmax(0).t());
    for (std::int64_t j = 20; j < 64; ++j) {
      EXPECT_EQ(p[static_cast<std::size_t>(j)], 0.0) << j;
      EXPECT_EQ(p_columns[static_cast<std::size_t>(j)], 0.0) << j;
      EXPECT_EQ(log_p[static_cast<std::size_t>(j)], -kInf) << j;
    }
    EXPECT_EQ(p[0], values(full({}, 1.0 / 20, TensorOptions().dtype(dtype)))[0]);
    // log-softmax's backward: g - exp(log p) Σ g, which is g where p is 0.
    const Tensor leaf = scores.clone().requires_grad_(true);
    const Tensor g = ones({3, 64}, TensorOptions().dtype(dtype));
    leaf.log_softmax(1).backward(g);
    for (std::int64_t j = 20; j < 64; ++j) EXPECT_EQ(values(leaf.grad())[static_cast<std::size_t>(j)], 1.0) << j;
  }
}

}  // namespace
}  // namespace kiln
