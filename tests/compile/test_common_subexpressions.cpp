// tests/compile/test_common_subexpressions.cpp — eliminate_common_subexpressions (Note [The same
// value made twice]): a call that repeats an earlier one on the same values leaves the graph and
// its readers read the earlier result; a repeat whose input changed in between, or whose result
// is written again, stays; every replay computes what the eager step computes.
#include <gtest/gtest.h>

#include "compile/capture.h"
#include "compile/passes.h"
#include "support/test_util.h"

namespace kiln {
namespace {

/// Eager and replayed runs compute the same bits only on a fixed thread count (the default
/// count backs off while the machine is busy; Note [Exact resumption]).
class CommonSubexpressions : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(get_num_threads()); }
};

/// How many calls of `g` copy from a view with these strides (the printed graph's operand).
std::size_t copies_of(const compiler::Graph& g, const std::string& strides) {
  return testing::occurrences(g.print(), "/strides" + strides + ")");
}

/// Self-attention's shape of work: the same transposed view copied once per projection.
Tensor three_projections(const Tensor& x, const Tensor& w) {
  const Tensor q = x.transpose(0, 1).contiguous().matmul(w);
  const Tensor k = x.transpose(0, 1).contiguous().matmul(w * 2.0);
  const Tensor v = x.transpose(0, 1).contiguous().matmul(w * 3.0);
  return (q + k + v).sum();
}

TEST_F(CommonSubexpressions, ThreeCopiesOfOneViewBecomeOne) {
  manual_seed(2);
  const Tensor w = randn({5, 3});
  auto plain = compile([&](const Tensor& x) { return three_projections(x, w); }, {.passes = "none"});
  auto merged = compile([&](const Tensor& x) { return three_projections(x, w); },
                        {.passes = "eliminate_common_subexpressions,plan_memory"});
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({4, 6, 5});
    const Tensor eager = three_projections(x, w);
    EXPECT_TRUE(equal(merged(x), eager)) << "step " << i;
    EXPECT_TRUE(equal(plain(x), eager)) << "step " << i;
  }
  EXPECT_TRUE(merged.last_call_replayed());
  EXPECT_EQ(copies_of(plain.graph(), "[5, 30, 1]"), 3u) << plain.graph().print();
  EXPECT_EQ(copies_of(merged.graph(), "[5, 30, 1]"), 1u) << merged.graph().print();
}

TEST_F(CommonSubexpressions, ARepeatAfterItsInputChangedStays) {
  // The same copy of x before and after x is updated in place: two values, two copies.
  auto step = compile(
      [](const Tensor& x) {
        Tensor y = x * 1.0;
        const Tensor before = y.transpose(0, 1).contiguous();
        y.add_(1.0);
        const Tensor after = y.transpose(0, 1).contiguous();
        return before * 10.0 + after;
      },
      {.passes = "eliminate_common_subexpressions"});
  manual_seed(3);
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({2, 3});
    const Tensor t = x.transpose(0, 1);
    EXPECT_TRUE(equal(step(x), t * 10.0 + (t + 1.0))) << "step " << i;
  }
  EXPECT_EQ(copies_of(step.graph(), "[1, 3]"), 2u) << step.graph().print();
}

TEST_F(CommonSubexpressions, ARepeatWhoseResultIsWrittenAgainStays) {
  // Two identical copies, the second then updated in place: sharing one buffer would change
  // the first.
  auto step = compile(
      [](const Tensor& x) {
        const Tensor a = x.transpose(0, 1).contiguous();
        Tensor b = x.transpose(0, 1).contiguous();
        b.mul_(2.0);
        return a + b;
      },
      {.passes = "eliminate_common_subexpressions"});
  manual_seed(4);
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({2, 3});
    EXPECT_TRUE(equal(step(x), x.transpose(0, 1) * 3.0)) << "step " << i;
  }
  EXPECT_EQ(copies_of(step.graph(), "[1, 3]"), 2u) << step.graph().print();
}

}  // namespace
}  // namespace kiln
