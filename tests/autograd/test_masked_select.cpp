// tests/autograd/test_masked_select.cpp — nonzero and masked_select as PyTorch defines them:
// positions in row-major order (NaN counts as nonzero), a mask that broadcasts either way, the
// gradient back at the selected positions (gradcheck, and summed where broadcasting repeated an
// element), and the errors PyTorch gives.
#include <cmath>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

TEST(Nonzero, PositionsInRowMajorOrderAndNanCounts) {
  const Tensor x = tensor({{0.0, 1.5, 0.0}, {std::nan(""), 0.0, -2.0}});
  const Tensor at = x.nonzero();
  EXPECT_EQ(at.dtype(), kInt64);
  EXPECT_EQ(at.sizes(), (Shape{3, 2}));
  EXPECT_EQ(values(at), (std::vector<double>{0, 1, 1, 0, 1, 2}));
  EXPECT_EQ(nonzero(tensor({false, true, true})).sizes(), (Shape{2, 1}));
  EXPECT_EQ(zeros({2, 3}).nonzero().sizes(), (Shape{0, 2}));
  EXPECT_ERROR(empty({2}, TensorOptions().device(kMeta)).nonzero(),
               "nonzero: the number of nonzero elements of a meta tensor is unknown");
}

TEST(MaskedSelect, SelectsWhereTheMaskIsTrueBroadcastingEitherWay) {
  const Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}});
  EXPECT_EQ(values(x.masked_select(x > 2.5)), (std::vector<double>{3, 4, 5, 6}));
  // A row mask broadcast over x, and x broadcast over a larger mask.
  EXPECT_EQ(values(masked_select(x, tensor({true, false, true}))), (std::vector<double>{1, 3, 4, 6}));
  const Tensor row = tensor({10.0, 20.0});
  EXPECT_EQ(values(row.masked_select(tensor({{true, false}, {true, true}}))), (std::vector<double>{10, 10, 20}));
  EXPECT_EQ(x.masked_select(zeros({2, 3}, TensorOptions().dtype(kBool))).sizes(), (Shape{0}));
  EXPECT_ERROR(x.masked_select(ones({2, 3})),
               "masked_select: expected BoolTensor for mask, got a kiln.float32 mask");
}

TEST(MaskedSelect, GradientsReachTheSelectedPositions) {
  manual_seed(3);
  const Tensor x = randn({3, 4}, dtype(kFloat64).requires_grad(true));
  const Tensor mask = randn({3, 4}) > 0.0;
  EXPECT_TRUE(autograd::gradcheck([&](const TensorList& in) { return in[0].masked_select(mask); }, {x}));
  // Broadcast: a [4] input selected through a [3, 4] mask sums each column's selections.
  const Tensor v = randn({4}, dtype(kFloat64).requires_grad(true));
  EXPECT_TRUE(autograd::gradcheck([&](const TensorList& in) { return in[0].masked_select(mask); }, {v}));
  v.masked_select(mask).sum().backward();
  EXPECT_TRUE(equal(v.grad(), mask.to(kFloat64).sum(0)));
}
