// The op-kernel route (core/backends.h) — conv2d, training batch_norm and the 2-D pools as one
// kernel per direction, cuDNN on CUDA — must be invisible except in speed and in the graph's
// node names. On the CPU the route runs reference kernels; these tests turn it on and compare
// it with the composite route every value and gradient.
#include <gtest/gtest.h>

#include <functional>

#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;

struct RouteResult {
  Tensor out;
  TensorList grads;
  std::string node;
};

/// Runs fn on fresh leaves copied from `inputs` and backpropagates `seed`.
RouteResult run(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs, bool op_kernels) {
  backends::OpKernelsGuard route(DeviceType::CPU, op_kernels);
  TensorList leaves;
  for (const Tensor& t : inputs) leaves.push_back(t.defined() ? t.clone().as_leaf(true) : Tensor());
  RouteResult r;
  r.out = fn(leaves);
  r.node = r.out.grad_fn() ? r.out.grad_fn()->name() : "";
  manual_seed(7);
  r.out.backward(randn(r.out.sizes(), r.out.options()));
  for (const Tensor& t : leaves) r.grads.push_back(t.defined() ? t.grad() : Tensor());
  return r;
}

void expect_same_on_both_routes(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                                const std::string& kernel_node) {
  const RouteResult composite = run(fn, inputs, false), kernels = run(fn, inputs, true);
  if (!kernel_node.empty()) {  // the op's own node is last unless something follows it
    EXPECT_NE(composite.node, kernel_node);
    EXPECT_EQ(kernels.node, kernel_node);
  }
  EXPECT_TRUE(tensors_near(kernels.out, composite.out, 1e-10));
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    if (inputs[i].defined()) {
      EXPECT_TRUE(tensors_near(kernels.grads[i], composite.grads[i], 1e-10));
    }
  }
}

TEST(OpKernelRoute, CpuDefaultsPerFamilyAndTheGuardOverridesEveryFamily) {
  using backends::OpFamily;
  const OpFamily families[] = {OpFamily::Convolution, OpFamily::Pooling, OpFamily::BatchNorm,
                               OpFamily::MatrixProduct};
  auto all_are = [&](bool expected) {
    for (OpFamily f : families) {
      if (backends::op_kernels_enabled(DeviceType::CPU, f) != expected) return false;
    }
    return true;
  };
  // With oneDNN, convolution and matrix products take it; pooling and batch norm keep Kiln's
  // kernels (Note [What the CPU's library route covers]).
  auto is_default = [&] {
    const bool onednn = backends::onednn_is_available();
    return backends::op_kernels_enabled(DeviceType::CPU, OpFamily::Convolution) == onednn &&
           backends::op_kernels_enabled(DeviceType::CPU, OpFamily::MatrixProduct) == onednn &&
           !backends::op_kernels_enabled(DeviceType::CPU, OpFamily::Pooling) &&
           !backends::op_kernels_enabled(DeviceType::CPU, OpFamily::BatchNorm);
  };
  EXPECT_TRUE(is_default());
  {
    backends::OpKernelsGuard on(DeviceType::CPU, true);
    EXPECT_TRUE(all_are(true));
    {
      backends::OpKernelsGuard off(DeviceType::CPU, false);
      EXPECT_TRUE(all_are(false));
    }
    EXPECT_TRUE(all_are(true));
  }
  EXPECT_TRUE(is_default());
}

TEST(OpKernelRoute, Conv2dGivesTheSameValuesAndGradients) {
  manual_seed(0);
  const TensorList in{randn({2, 4, 7, 6}, kFloat64), randn({6, 2, 3, 2}, kFloat64), randn({6}, kFloat64)};
  expect_same_on_both_routes(
      [](const TensorList& x) { return conv2d(x[0], x[1], x[2], {2, 1}, {1, 1}, {1, 2}, 2); }, in,
      "ConvolutionBackward0");  // the bias inside the node, as in PyTorch
  expect_same_on_both_routes([](const TensorList& x) { return conv2d(x[0], x[1], {}, {1, 1}, {0, 1}); },
                             {in[0], randn({3, 4, 3, 3}, kFloat64)}, "ConvolutionBackward0");
}

TEST(OpKernelRoute, TrainingBatchNormGivesTheSameValuesGradientsAndRunningStatistics) {
  manual_seed(1);
  const TensorList in{randn({4, 3, 5, 2}, kFloat64), randn({3}, kFloat64), randn({3}, kFloat64)};
  Tensor mean_a = zeros({3}, kFloat64), var_a = ones({3}, kFloat64);
  Tensor mean_b = zeros({3}, kFloat64), var_b = ones({3}, kFloat64);
  {
    backends::OpKernelsGuard on(DeviceType::CPU, true);
    (void)batch_norm(in[0], mean_a, var_a, in[1], in[2], true, 0.2);
  }
  (void)batch_norm(in[0], mean_b, var_b, in[1], in[2], true, 0.2);
  EXPECT_TRUE(tensors_near(mean_a, mean_b, 1e-12));
  EXPECT_TRUE(tensors_near(var_a, var_b, 1e-12));
  expect_same_on_both_routes([](const TensorList& x) { return batch_norm(x[0], {}, {}, x[1], x[2], true); }, in,
                             "NativeBatchNormBackward0");
}

TEST(OpKernelRoute, PoolsGiveTheSameValuesAndGradients) {
  manual_seed(2);
  const TensorList in{randn({2, 3, 7, 8}, kFloat64)};
  expect_same_on_both_routes([](const TensorList& x) { return max_pool2d(x[0], {3, 2}, Pair{2, 2}, {1, 1}); }, in,
                             "MaxPool2DBackward0");
  expect_same_on_both_routes(
      [](const TensorList& x) { return avg_pool2d(x[0], {3, 3}, Pair{2, 3}, {1, 1}, /*count_include_pad=*/false); },
      in, "AvgPool2DBackward0");
  expect_same_on_both_routes(
      [](const TensorList& x) { return avg_pool2d(x[0], {2, 3}, Pair{1, 2}, {1, 1}, /*count_include_pad=*/true); }, in,
      "AvgPool2DBackward0");
}

TEST(OpKernelRoute, DilatedMaxPoolingStaysOnTheCompositeRoute) {
  // cuDNN's pooling has no dilation.
  backends::OpKernelsGuard on(DeviceType::CPU, true);
  const Tensor x = randn({1, 1, 6, 6}, requires_grad());
  EXPECT_EQ(std::string(max_pool2d(x, {2, 2}, std::nullopt, {0, 0}, {2, 2}).grad_fn()->name()),
            "MaxPool2DWithIndicesBackward0");
}

}  // namespace
}  // namespace kiln
