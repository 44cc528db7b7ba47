// tests/autograd/test_tensor_method_forms.cpp — the Tensor methods PyTorch users reach for:
// requires_grad_ (leaves only), half/bfloat16, split with a list of sizes, and the method forms
// of free functions (triu, tril, where, isclose, allclose, equal). Each asserts values.
#include <gtest/gtest.h>

#include <limits>

#include "kiln.h"
#include "support/test_util.h"

namespace {

using namespace kiln;
using kiln::testing::values;

TEST(TensorMethodForms, RequiresGradUnderscoreChangesALeafForEveryHandle) {
  Tensor x = tensor({1.0, 2.0, 3.0});
  const Tensor alias = x;  // another handle to the same leaf sees the change, as in PyTorch
  EXPECT_FALSE(x.requires_grad());
  const Tensor& same = x.requires_grad_();
  EXPECT_TRUE(same.is_same(x));
  EXPECT_TRUE(alias.requires_grad());
  (x * x).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 4, 6}));
  alias.requires_grad_(false);
  EXPECT_FALSE(x.requires_grad());
  EXPECT_FALSE((x * 2).requires_grad());
}

TEST(TensorMethodForms, RequiresGradUnderscoreFreezesModuleParameters) {
  nn::Linear fc(3, 2);
  for (const Tensor& p : fc.parameters()) p.requires_grad_(false);
  EXPECT_FALSE(fc.weight.requires_grad());
  EXPECT_FALSE(fc.forward(ones({1, 3})).requires_grad());
  EXPECT_EQ(fc.num_parameters(/*trainable_only=*/true), 0);
}

TEST(TensorMethodForms, RequiresGradUnderscoreOnANonLeafIsRefusedAsInPyTorch) {
  const Tensor x = tensor({1.0, 2.0}).requires_grad_();
  const Tensor y = x * 2;
  EXPECT_TRUE(y.requires_grad_(true).requires_grad());  // already requires grad: nothing changes
  EXPECT_FALSE(y.is_leaf());
  try {
    y.requires_grad_(false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("you can only change requires_grad flags of leaf variables. If you want to "
                                          "use a computed variable in a subgraph that doesn't require differentiation "
                                          "use var_no_grad = var.detach().",
                                          0),
              0u)
        << e.what();
  }
  EXPECT_THROW(tensor({1, 2}).requires_grad_(), TypeError);  // Int64 cannot require grad
}

TEST(TensorMethodForms, HalfAndBFloat16Convert) {
  const Tensor x = tensor({1.0, 0.1, 65504.0});
  const Tensor h = x.half(), b = x.bfloat16();
  EXPECT_EQ(h.dtype(), kFloat16);
  EXPECT_EQ(b.dtype(), kBFloat16);
  // 0.1 rounds to the nearest half (0.0999755859375) and bfloat16 (0.10009765625).
  EXPECT_EQ(values(h), (std::vector<double>{1.0, 0.0999755859375, 65504.0}));
  EXPECT_EQ(values(b), (std::vector<double>{1.0, 0.10009765625, 65536.0}));
  EXPECT_TRUE(h.half().is_same(h));  // no copy when the dtype is already there
}

TEST(TensorMethodForms, SplitTakesAListOfSizes) {
  const Tensor x = arange(0.0, 10.0).reshape({2, 5});
  const TensorList parts = x.split({2, 3}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(values(parts[0]), (std::vector<double>{0, 1, 5, 6}));
  EXPECT_EQ(values(parts[1]), (std::vector<double>{2, 3, 4, 7, 8, 9}));
  EXPECT_EQ(x.split(2, 1).size(), 3u);  // a lone integer is still the size of each piece
  EXPECT_EQ(x.split({1, 0, 4}, -1)[1].sizes(), (Shape{2, 0}));
  try {
    x.split({2, 2}, 1);
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's "
                                          "size at dimension 1), but got split_sizes=[2, 2]",
                                          0),
              0u)
        << e.what();
  }
  try {
    x.split({6, -1}, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("split_with_sizes expects split_sizes have only non-negative entries, but "
                                          "got split_sizes=[6, -1]",
                                          0),
              0u)
        << e.what();
  }
}

TEST(TensorMethodForms, SplitBackwardReachesEveryPiece) {
  const Tensor x = arange(0.0, 5.0).requires_grad_();
  const TensorList parts = x.split({2, 3});
  ((parts[0] * 2).sum() + (parts[1] * 3).sum()).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2, 3, 3, 3}));
}

TEST(TensorMethodForms, PiecesOfSplitChunkAndUnbindShareOneNodeNamedAsPyTorchNamesIt) {
  // As Note [One node for the pieces] has them: views of their input, made by one node whose
  // backward puts the pieces' gradients side by side; pieces nobody used get zeros.
  const Tensor x = arange(0.0, 24.0).reshape({6, 4}).requires_grad_();
  const TensorList chunks = x.chunk(3);
  EXPECT_STREQ(node_name(*chunks[0].grad_fn()), "SplitBackward0");
  EXPECT_EQ(chunks[0].grad_fn(), chunks[2].grad_fn());
  EXPECT_EQ(chunks[1].data_ptr<float>(), x.data_ptr<float>() + 8);
  EXPECT_STREQ(node_name(*x.split({1, 5})[1].grad_fn()), "SplitWithSizesBackward0");
  const TensorList rows = x.unbind(0);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_STREQ(node_name(*rows[3].grad_fn()), "UnbindBackward0");
  EXPECT_EQ(values(rows[3]), (std::vector<double>{12, 13, 14, 15}));
  ((chunks[2] * 3).sum() + (rows[0] * 2).sum()).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0,
                                                    0, 0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3}));
  // Columns, and a piece that requires grad is not modified in place (Kiln never rewrites a
  // tensor's history).
  const TensorList columns = x.unbind(1);
  EXPECT_EQ(values(columns[1]), (std::vector<double>{1, 5, 9, 13, 17, 21}));
  EXPECT_THROW(columns[1].mul_(2), std::exception);
  EXPECT_THROW(tensor(3.0).unbind(0), std::exception);
}

TEST(TensorMethodForms, TriuAndTrilMethods) {
  const Tensor x = arange(1.0, 10.0).reshape({3, 3});
  EXPECT_EQ(values(x.triu()), (std::vector<double>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(values(x.triu(1)), (std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  EXPECT_EQ(values(x.tril()), (std::vector<double>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(values(x.tril(-1)), (std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
}

TEST(TensorMethodForms, WhereIsCloseAllCloseEqualMethods) {
  const Tensor x = tensor({1.0, 2.0, 3.0});
  const Tensor y = tensor({1.0, 2.5, 3.0 + 1e-7});
  const Tensor keep = tensor({true, false, true});
  EXPECT_EQ(values(x.where(keep, y)), (std::vector<double>{1.0, 2.5, 3.0}));
  EXPECT_EQ(values(x.where(keep, -1)), (std::vector<double>{1.0, -1.0, 3.0}));
  EXPECT_EQ(values(x.isclose(y)), (std::vector<double>{1, 0, 1}));
  EXPECT_FALSE(x.allclose(y));
  EXPECT_TRUE(x.allclose(y, 0.0, 0.6));
  EXPECT_FALSE(x.equal(y));
  EXPECT_TRUE(x.equal(tensor({1.0, 2.0, 3.0})));
}

// torch.isclose(a, b, equal_nan=True): NaN is close to NaN, and still to nothing else.
TEST(TensorMethodForms, IsCloseAndAllCloseTakeEqualNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor a = tensor({1.0, nan, nan, 2.0});
  const Tensor b = tensor({1.0, nan, 3.0, nan});
  EXPECT_TRUE(isclose(a, b).equal(tensor({true, false, false, false})));
  EXPECT_TRUE(isclose(a, b, 1e-5, 1e-8, /*equal_nan=*/true).equal(tensor({true, true, false, false})));
  EXPECT_TRUE(a.isclose(b, 1e-5, 1e-8, true).equal(tensor({true, true, false, false})));
  const Tensor c = tensor({1.0, nan});
  EXPECT_FALSE(c.allclose(c));
  EXPECT_TRUE(c.allclose(c, 1e-5, 1e-8, true));
  EXPECT_TRUE(allclose(c, c, 1e-5, 1e-8, /*equal_nan=*/true));
  EXPECT_FALSE(allclose(c, tensor({1.0, 0.0}), 1e-5, 1e-8, true));
}

}  // namespace
