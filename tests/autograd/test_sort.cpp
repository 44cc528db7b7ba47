// tests/autograd/test_sort.cpp — sort, topk and kthvalue: PyTorch's order (NaN largest, ties
// stable), any dim, and gradients that reach exactly the picked elements (gradcheck); prod
// over several dims and std_mean/var_mean against their one-part forms.
#include <cmath>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

TEST(Sort, NanIsLargestAndTiesKeepTheirOrder) {
  const Tensor x = tensor({2.0, std::nan(""), 1.0, 2.0, -1.0});
  const auto ascending = x.sort();
  EXPECT_EQ(values(ascending.indices), (std::vector<double>{4, 2, 0, 3, 1}));
  EXPECT_TRUE(std::isnan(values(ascending.values)[4]));
  const auto descending = x.sort(0, true);
  EXPECT_EQ(values(descending.indices), (std::vector<double>{1, 0, 3, 2, 4}));
  EXPECT_EQ(values(tensor({3, 1, 2}).sort().values), (std::vector<double>{1, 2, 3}));  // integers too
}

TEST(Sort, AlongAnyDimWithGradients) {
  manual_seed(5);
  const Tensor x = randn({3, 4, 5}, dtype(kFloat64).requires_grad(true));
  const auto s = x.sort(1);
  EXPECT_TRUE(equal(s.values, x.gather(1, s.indices)));
  EXPECT_TRUE((s.values.narrow(1, 1, 3) >= s.values.narrow(1, 0, 3)).all().item<bool>());
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return in[0].sort(1, true).values; }, {x}));
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return in[0].topk(2, -1).values; }, {x}));
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return in[0].kthvalue(3, 0).values; }, {x}));
  const auto top = x.topk(2, 2, /*largest=*/false);
  EXPECT_EQ(top.values.sizes(), (Shape{3, 4, 2}));
  EXPECT_TRUE(equal(top.values, x.sort(2).values.narrow(2, 0, 2)));
  EXPECT_ERROR(x.topk(6, 2), "selected index k out of range");
  EXPECT_ERROR(x.kthvalue(0, 2), "kthvalue(): selected number k out of range");
}

TEST(Reductions, ProdOverSeveralDimsAndStdMean) {
  manual_seed(6);
  const Tensor x = randn({2, 3, 4}, dtype(kFloat64).requires_grad(true));
  EXPECT_TRUE(kiln::testing::tensors_near(x.prod({0, 2}), x.prod(2).prod(0), 1e-12));
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return in[0].prod({0, 2}, true); }, {x}));
  const auto [s, m] = std_mean(x, {1});
  EXPECT_TRUE(equal(s, x.std({1})));
  EXPECT_TRUE(equal(m, x.mean({1})));
  const auto [v, m2] = var_mean(x, {}, false);
  EXPECT_TRUE(equal(v, x.var({}, false)));
  EXPECT_TRUE(equal(m2, x.mean()));
}

TEST(Reductions, AllAndAny) {
  const Tensor x = tensor({{1.0, 0.0, 2.0}, {3.0, 4.0, 5.0}});
  EXPECT_FALSE(x.all().item<bool>());
  EXPECT_TRUE(x.any().item<bool>());
  EXPECT_EQ(values(x.all(1)), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(x.any(0, true)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(x.all(1).dtype(), kBool);
  EXPECT_TRUE(zeros({0}).all().item<bool>());  // vacuous truth, as in PyTorch
  EXPECT_FALSE(zeros({0}).any().item<bool>());
  EXPECT_TRUE(tensor({true, true}).all().item<bool>());
}

// Reference values printed by PyTorch 1.13: ties go to the smallest value, at its last index.
TEST(Sort, ModeMatchesPyTorch) {
  const auto m = tensor({{1.0, 2.0, 2.0, 1.0, 3.0}, {5.0, 4.0, 4.0, 5.0, 5.0}}).mode(1);
  EXPECT_EQ(values(m.values), (std::vector<double>{1, 5}));
  EXPECT_EQ(values(m.indices), (std::vector<double>{3, 4}));
  const auto [v, i] = tensor({2, 7, 7, 2, 7, 2}).mode();
  EXPECT_EQ(v.item<std::int64_t>(), 2);
  EXPECT_EQ(i.item<std::int64_t>(), 5);
  // The gradient reaches exactly the element picked. (Finite differences cannot check a mode:
  // a nudge breaks the tie that makes it the mode.)
  const Tensor x = tensor({{1.0, 2.0, 2.0, 1.0, 3.0}, {5.0, 4.0, 4.0, 5.0, 5.0}}, dtype(kFloat64).requires_grad(true));
  EXPECT_EQ(x.mode(0, true).values.sizes(), (Shape{1, 5}));
  x.mode(1).values.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 0, 0, 1}));
}
