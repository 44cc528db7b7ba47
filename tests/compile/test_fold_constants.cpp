// tests/compile/test_fold_constants.cpp — fold_constants (Note [Values computed once]): the
// calls that make a value from constants alone leave the replay and their value stays; a value
// that depends on the step's inputs, on state outside the graph, or that is overwritten after
// it is read, keeps its calls, and every replay computes what the eager step computes.
#include <gtest/gtest.h>

#include "compile/capture.h"
#include "compile/passes.h"
#include "support/test_util.h"

namespace kiln {
namespace {

/// Eager and replayed runs compute the same bits only on a fixed thread count (the default
/// count backs off while the machine is busy; Note [Exact resumption]).
class FoldConstants : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(get_num_threads()); }
};

/// A step with a causal mask made from arange as the charlm Transformer makes it, and a scale
/// filled in Float64 and cast: none of it depends on x.
Tensor masked_scores(const Tensor& x) {
  const Tensor positions = arange(4);
  const Tensor future = positions.unsqueeze(0) > positions.unsqueeze(1);
  const Tensor mask = zeros({4, 4}).masked_fill(future, -1e9);
  return ((x * 0.5) + mask).softmax(1).sum(0);
}

TEST_F(FoldConstants, TheMaskLeavesTheReplayAndItsValueStays) {
  auto folded = compile([](const Tensor& x) { return masked_scores(x); }, {.passes = "fold_constants"});
  auto plain = compile([](const Tensor& x) { return masked_scores(x); }, {.passes = "none"});
  manual_seed(3);
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({4, 4});
    const Tensor eager = masked_scores(x);
    EXPECT_TRUE(equal(folded(x), eager)) << "step " << i;
    EXPECT_TRUE(equal(plain(x), eager)) << "step " << i;
  }
  EXPECT_TRUE(folded.last_call_replayed());
  const compiler::Graph& g = folded.graph();
  EXPECT_EQ(g.count(compiler::KernelFamily::Arange), 0u) << g.print();
  EXPECT_EQ(plain.graph().count(compiler::KernelFamily::Arange), 1u);
  EXPECT_LT(g.count(compiler::Node::Kind::Kernel), plain.graph().count(compiler::Node::Kind::Kernel));
  // What the replay reads: the mask, and the scale, which x * 0.5 wraps as a tensor.
  ASSERT_FALSE(g.constants.empty()) << g.print();
  EXPECT_NE(g.print().find("%const0: float32[4, 4] = constant"), std::string::npos) << g.print();
  EXPECT_NE(g.to_dot().find("const0 [shape=ellipse, style=dashed"), std::string::npos);
}

TEST_F(FoldConstants, AValueThatDependsOnTheStepKeepsItsCalls) {
  // zeros then an in-place add of x: the zeros are overwritten by a call that reads x, so the
  // fill must run again at every replay (folding it would start from last step's sum).
  auto step = compile(
      [](const Tensor& x) {
        Tensor total = zeros({3});
        total.add_(x);
        total.add_(x);
        return total * 1.0;
      },
      {.passes = "fold_constants,plan_memory"});
  manual_seed(4);
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({3});
    EXPECT_TRUE(equal(step(x), x * 2.0)) << "step " << i;
  }
  EXPECT_EQ(step.graph().count(compiler::KernelFamily::Fill), 1u) << step.graph().print();
}

TEST_F(FoldConstants, StateOutsideTheGraphIsNeverFolded) {
  // A tensor the caller holds and refills between steps: its fill reads nothing, but the value
  // belongs to the caller, who may change it, so the call stays in the graph.
  Tensor held = zeros({2});
  auto step = compile(
      [&](const Tensor& x) {
        held.fill_(1.0);
        return x + held;
      },
      {.passes = "fold_constants"});
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(equal(step(full({2}, static_cast<double>(i))), full({2}, i + 1.0))) << "step " << i;
    held.fill_(-5.0);  // the caller's change must not leak into the next step
  }
  EXPECT_EQ(step.graph().count(compiler::KernelFamily::Fill), 1u) << step.graph().print();
  EXPECT_TRUE(step.graph().constants.empty());
}

TEST_F(FoldConstants, AValueRewrittenAfterItIsReadIsNotFolded) {
  // One buffer, filled with 2, read, then filled with 3 and read again: kept whole, the first
  // read would see 3. Both fills must stay.
  auto step = compile(
      [](const Tensor& x) {
        Tensor scale = empty({1});
        scale.fill_(2.0);
        const Tensor a = x * scale;
        scale.fill_(3.0);
        return a + x * scale;
      },
      {.passes = "fold_constants"});
  for (int i = 0; i < 3; ++i) {
    const Tensor x = full({2}, static_cast<double>(i + 1));
    EXPECT_TRUE(equal(step(x), x * 5.0)) << "step " << i;
  }
  EXPECT_EQ(step.graph().count(compiler::KernelFamily::Fill), 2u) << step.graph().print();
}

}  // namespace
}  // namespace kiln
