// tests/core/test_smoke.cpp — first contact: a tensor is created, printed, added, reduced.
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values_near;

TEST(Smoke, CreateAddSum) {
  Tensor a = tensor({{1., 2.}, {3., 4.}});
  Tensor b = ones({2, 2});
  EXPECT_EQ(a.dtype(), kFloat32);
  EXPECT_TRUE(values_near(a + b, {2, 3, 4, 5}));
  EXPECT_TRUE(values_near((a * b).sum(), {10}));
  EXPECT_EQ(to_string(a), "tensor([[1., 2.],\n        [3., 4.]])");
}

TEST(Smoke, Backward) {
  Tensor w = tensor({1.0, 2.0, 3.0}, requires_grad());
  Tensor loss = (w * w).sum();
  loss.backward();
  EXPECT_TRUE(values_near(w.grad(), {2, 4, 6}));
}
