// tests/autograd/test_engine.cpp — the engine's semantics as tiny hand-derived cases, each
// with its derivation in a comment.
#include <cmath>
#include <memory>
#include <thread>

#include "autograd/node.h"
#include "core/autograd_meta.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values_near;

namespace {
Tensor leaf(std::vector<double> v) { return tensor(v, TensorOptions().dtype(kFloat64).requires_grad(true)); }
}  // namespace

TEST(Engine, OutputsAreCreatedWithTheirGradFn) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_STREQ(y.grad_fn()->name(), "MulBackward0");
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  EXPECT_TRUE(x.is_leaf());
  // Integer and bool outputs never require grad, even from inputs that do.
  EXPECT_FALSE((x > 1).requires_grad());
  EXPECT_FALSE(x.max(0).indices.requires_grad());
  EXPECT_FALSE(x.argmax().requires_grad());
  // Nothing requires grad: nothing is recorded.
  EXPECT_EQ((ones({2}) * 2).grad_fn(), nullptr);
}

TEST(Engine, DiamondAccumulatesBothPaths) {
  // y = a*x + b*x with a = 2x and b = x^2 used through two branches:
  // f = sum(2x * x + x^2 * x) = sum(2x^2 + x^3),  df/dx = 4x + 3x^2 = [7, 20] at x = [1, 2]
  Tensor x = leaf({1, 2});
  Tensor a = x * 2;
  Tensor b = x * x;
  Tensor f = (a * x + b * x).sum();
  f.backward();
  EXPECT_TRUE(values_near(x.grad(), {7, 20}));
}

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  // d(sum 3x)/dx = 3, twice: 6
  Tensor x = leaf({1, 2});
  (x * 3).sum().backward();
  (x * 3).sum().backward();
  EXPECT_TRUE(values_near(x.grad(), {6, 6}));
  x.mutable_grad() = Tensor();  // zero_grad(set_to_none)
  (x * 3).sum().backward();
  EXPECT_TRUE(values_near(x.grad(), {3, 3}));
}

TEST(Engine, NonScalarRootNeedsAGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  EXPECT_ERROR(y.backward(), "grad can be implicitly created only for scalar outputs");
  // With a gradient (vector-Jacobian product): d(2x)/dx^T v = 2v
  y.backward(tensor({1.0, -1.0}, kFloat64));
  EXPECT_TRUE(values_near(x.grad(), {2, -2}));
  EXPECT_ERROR(ones({2}).sum().backward(), "element 0 of tensors does not require grad and does not have a grad_fn");
}

TEST(Engine, SecondBackwardNeedsRetainGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = (x.exp()).sum();  // exp saves its output
  y.backward();
  EXPECT_ERROR(y.backward(), "Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed)");
  Tensor z = (x.exp()).sum();
  z.backward({}, true);
  z.backward();  // the graph was kept once
  // d(sum e^x)/dx = e^x: the first backward of y plus two of z
  EXPECT_TRUE(values_near(x.grad(), {3 * std::exp(1.0), 3 * std::exp(2.0)}));
}

TEST(Engine, SavedTensorsAreFreedAfterBackward) {
  Tensor x = leaf({1, 2, 3});
  std::weak_ptr<TensorImpl> saved;
  Tensor y;
  {
    Tensor e = x.exp();  // ExpBackward0 saves e's bytes
    saved = e.impl_ptr();
    y = (e * 2).sum();   // MulBackward0 saves e too
  }
  // e's handle is gone but the graph still holds it (saved for backward)
  EXPECT_FALSE(saved.expired());
  y.backward();
  // without retain_graph every saved tensor is released
  EXPECT_TRUE(saved.expired());
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2});
  Tensor y;
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(is_grad_enabled());
    y = x * 2;
    {
      EnableGradGuard enable;
      EXPECT_TRUE((x * 2).requires_grad());
    }
    EXPECT_FALSE(is_grad_enabled());
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_NE(autograd::explain(y).find("computed while grad mode was off"), std::string::npos);
}

TEST(Engine, GradModeIsThreadLocal) {
  NoGradGuard no_grad;
  bool other_thread_enabled = false;
  std::thread([&] { other_thread_enabled = is_grad_enabled(); }).join();
  EXPECT_TRUE(other_thread_enabled);
}

TEST(Engine, DetachSharesMemoryAndVersionButNotHistory) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.shares_memory(y));
  EXPECT_EQ(d.provenance().origin, TensorOrigin::Detached);
  d.add_(1);  // allowed: d requires no grad; bumps the shared counter
  EXPECT_EQ(y._version(), 1u);
  EXPECT_NE(autograd::explain(d).find("detach()"), std::string::npos);
}

TEST(Engine, InPlaceModificationOfASavedTensorIsDetected) {
  // exp saves its output; changing it in place (under no-grad) makes its gradient wrong.
  Tensor x = leaf({1, 2, 3});
  Tensor y = x.exp();
  Tensor loss = y.sum();
  {
    NoGradGuard no_grad;
    y.mul_(2);
  }
  const std::string msg = kiln::testing::error_of([&] { loss.backward(); });
  EXPECT_NE(msg.find("one of the variables needed for gradient computation has been modified by an "
                     "inplace operation: [kiln.DoubleTensor [3]], which is output 0 of ExpBackward0, "
                     "is at version 1; expected version 0 instead."),
            std::string::npos)
      << msg;
}

TEST(Engine, InPlaceThroughAViewIsDetectedToo) {
  Tensor x = leaf({1, 2, 3});
  Tensor w = ones({3}, kFloat64);
  Tensor y = (x * w).sum();  // MulBackward0 saves w
  w.narrow(0, 1, 1).fill_(5);  // writing through a view bumps w's (shared) version
  EXPECT_ERROR(y.backward(), "is at version 1; expected version 0 instead");
}

TEST(Engine, InPlaceOnTensorsThatRequireGradIsRefused) {
  Tensor x = leaf({1, 2});
  EXPECT_ERROR(x.add_(1), "a leaf Variable that requires grad is being used in an in-place operation.");
  Tensor y = x * 2;
  EXPECT_ERROR(y.mul_(2), "mul_(): this tensor requires grad, and its grad_fn (MulBackward0) was fixed when it was created");
  Tensor plain = zeros({2}, kFloat64);
  EXPECT_ERROR(plain.add_(x), "add_(): the argument requires grad but this tensor was created without requires_grad");
  {
    NoGradGuard no_grad;  // how optimizers update parameters
    x.sub_(tensor({0.5, 0.5}, kFloat64));
  }
  EXPECT_TRUE(values_near(x, {0.5, 1.5}));
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
}

TEST(Engine, HooksSeeAndReplaceGradients) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3;
  Tensor seen;
  y.register_hook([&](const Tensor& g) {
    seen = g;
    return g * 10;  // replaces the gradient flowing on
  });
  HookHandle on_leaf = x.register_hook([](const Tensor& g) { return g + 1; });
  y.sum().backward();
  EXPECT_TRUE(values_near(seen, {1, 1}));
  // d(sum 3x)/dx = 3, times 10 from y's hook, plus 1 from x's own hook
  EXPECT_TRUE(values_near(x.grad(), {31, 31}));
  on_leaf.remove();
  x.mutable_grad() = Tensor();
  (x * 3).sum().backward();
  EXPECT_TRUE(values_near(x.grad(), {3, 3}));
}

TEST(Engine, PostAccumulateGradHooksSeeTheAccumulatedGradientOncePerBackward) {
  Tensor x = leaf({1, 2});
  std::vector<std::vector<double>> seen;
  HookHandle handle = x.register_post_accumulate_grad_hook([&](const Tensor& p) {
    seen.push_back({p.grad()[0].item<double>(), p.grad()[1].item<double>()});
  });
  (x * x + x * 3).sum().backward();  // two uses of x meet before the accumulator: one call
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{5, 7}));
  (x * 2).sum().backward();  // accumulates onto .grad: the hook sees the sum
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{7, 9}));
  handle.remove();
  (x * 2).sum().backward();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_THROW(((x * 2).register_post_accumulate_grad_hook([](const Tensor&) {})), Error);
  EXPECT_THROW(tensor({1.0}).register_post_accumulate_grad_hook([](const Tensor&) {}), Error);
}

TEST(Engine, RetainGradKeepsANonLeafGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * x;
  Tensor z = (y * 3).sum();
  y.retain_grad();
  z.backward();
  // dz/dy = 3; dz/dx = 3 * 2x
  EXPECT_TRUE(values_near(y.grad(), {3, 3}));
  EXPECT_TRUE(values_near(x.grad(), {6, 12}));
  Tensor w = x * 2;
  (w * 1).sum().backward();
  EXPECT_FALSE(w.grad().defined());  // non-leaf without retain_grad
  EXPECT_NE(autograd::explain(w).find("call retain_grad() on it before backward()"), std::string::npos);
}

TEST(Engine, SecondDerivativeOfACube) {
  // f = x^3: f' = 3x^2, f'' = 6x  ->  at x = 2: 12 and 12
  Tensor x = leaf({2});
  Tensor f = x * x * x;
  Tensor df = autograd::grad({f.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_TRUE(values_near(df, {12}));
  EXPECT_TRUE(df.requires_grad());
  Tensor d2f = autograd::grad({df.sum()}, {x})[0];
  EXPECT_TRUE(values_near(d2f, {12}));
}

TEST(Engine, GradientPenalty) {
  // Penalty on the gradient norm (WGAN-GP style): y = w . x, dy/dx = w,
  // penalty = (||w||^2 - 1)^2, d penalty / dw = 2 (||w||^2 - 1) * 2w.
  Tensor w = leaf({0.6, 0.8, 1.0});
  Tensor x = leaf({1, 2, 3});
  Tensor y = (w * x).sum();
  Tensor gx = autograd::grad({y}, {x}, {}, std::nullopt, true)[0];
  Tensor penalty = (gx.pow(2).sum() - 1).pow(2);
  penalty.backward();
  // ||w||^2 = 0.36 + 0.64 + 1 = 2 -> factor 2 * 1 * 2 = 4
  EXPECT_TRUE(values_near(w.grad(), {2.4, 3.2, 4.0}));
}

TEST(Engine, GradDoesNotTouchDotGradAndReportsUnusedInputs) {
  Tensor x = leaf({1, 2});
  Tensor unused = leaf({3});
  Tensor y = (x * x).sum();
  Tensor g = autograd::grad({y}, {x}, {}, true)[0];
  EXPECT_TRUE(values_near(g, {2, 4}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_ERROR(autograd::grad({y}, {x, unused}, {}, true),
               "One of the differentiated Tensors appears to not have been used in the graph. Set allow_unused=True");
  TensorList both = autograd::grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  EXPECT_FALSE(both[1].defined());
}

TEST(Engine, AnomalyModeNamesTheOpThatMadeNaN) {
  Tensor x = leaf({-1, 2});
  autograd::DetectAnomalyGuard anomaly;
  // sqrt(-1) is NaN forward; its backward 1/(2 sqrt x) is NaN too.
  Tensor y = x.sqrt().sum();
  const std::string msg = kiln::testing::error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("Function 'SqrtBackward0' returned nan values in its 0th output."), std::string::npos) << msg;
  EXPECT_NE(msg.find("the forward op 'SqrtBackward0' was called from"), std::string::npos) << msg;
}

TEST(Engine, LongChainBackpropagatesAndIsDestroyedIteratively) {
  // 100,000 ops in a chain: both the backward walk and the destruction of the graph must be
  // loops (recursion this deep would overflow the stack).
  Tensor x = leaf({1});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.sum().backward();
  EXPECT_TRUE(values_near(x.grad(), {1}));
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = z + 0.0;
  z = Tensor();  // drops 100,000 nodes
  y = Tensor();
  SUCCEED();
}

TEST(Engine, GraphExportsToDotWithNamesAndShapes) {
  Tensor w = leaf({1, 2, 3});
  w.impl()->autograd_meta().name = "fc.weight";
  Tensor loss = (w.exp() * 2).sum();
  const std::string dot = autograd::to_dot(loss);
  EXPECT_NE(dot.find("digraph backward"), std::string::npos);
  EXPECT_NE(dot.find("SumBackward1"), std::string::npos);
  EXPECT_NE(dot.find("ExpBackward0"), std::string::npos);
  EXPECT_NE(dot.find("fc.weight\\n[3] float64"), std::string::npos) << dot;
  EXPECT_NE(dot.find("saved: kiln.DoubleTensor [3]"), std::string::npos) << dot;
}

TEST(Engine, ExplainSaysWhyThereIsNoGradient) {
  EXPECT_NE(autograd::explain(ones({2}, kInt64)).find("integer/bool tensor"), std::string::npos);
  EXPECT_NE(autograd::explain(ones({2})).find("created by ones at test_engine.cpp"), std::string::npos);
  EXPECT_NE(autograd::explain(leaf({1})).find("a leaf that requires grad"), std::string::npos);
}

TEST(Engine, PrintShowsGradFnAndRequiresGrad) {
  Tensor x = tensor({{1., 2.}, {3., 4.}}, dtype(kFloat64).requires_grad(true));
  EXPECT_EQ(to_string(x), "tensor([[1., 2.],\n        [3., 4.]], dtype=kiln.float64, requires_grad=True)");
  EXPECT_EQ(to_string(x.sum()), "tensor(10., dtype=kiln.float64, grad_fn=<SumBackward1>)");
}
