// tests/onnx/test_export_ops.cpp — one small model per exported op, each exported with a
// dynamic batch axis and run in ONNX Runtime at batch 1 and 37 against Kiln's own result
// (max relative error <= 1e-5). See tests/onnx/onnx_runtime.h.
#include "onnx/onnx_runtime.h"

namespace kiln::testing {
namespace {

using OnnxOps = OnnxRuntimeTest;

Tensor images(std::int64_t n, std::int64_t c = 3, std::int64_t h = 9, std::int64_t w = 9) {
  return randn({n, c, h, w});
}

TEST_F(OnnxOps, Linear) {
  manual_seed(1);
  auto fc = std::make_shared<nn::Linear>(20, 7);
  Lambda m([fc](const Tensor& x) { return fc->forward(x); }, {{"fc", fc}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 20}); });
}

TEST_F(OnnxOps, LinearOnThreeDims) {
  manual_seed(2);
  auto fc = std::make_shared<nn::Linear>(6, 5, /*bias=*/false);
  Lambda m([fc](const Tensor& x) { return fc->forward(x); }, {{"fc", fc}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 4, 6}); });
}

TEST_F(OnnxOps, Matmul) {
  manual_seed(3);
  nn::Module none("None");
  expect_runtime_agrees(
      none, [](const std::vector<Tensor>& x) { return std::vector<Tensor>{matmul(x[0], x[1])}; },
      [](std::int64_t n) { return std::vector<Tensor>{randn({n, 4, 5}), randn({n, 5, 3})}; });
}

TEST_F(OnnxOps, Relu) {
  nn::Module none("None");
  Lambda m([](const Tensor& x) { return x.relu(); });
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 11}); });
}

struct ConvCase {
  const char* name;
  std::int64_t in, out, kernel;
  nn::Conv2dOptions options;
};

TEST_F(OnnxOps, Conv) {
  const ConvCase cases[] = {
      {"plain", 3, 4, 3, {}},
      {"stride_padding", 3, 5, 3, {.stride = {2, 2}, .padding = {1, 1}}},
      {"rectangular", 3, 4, 3, {.stride = {1, 2}, .padding = {2, 0}}},
      {"dilation", 3, 4, 3, {.padding = {2, 2}, .dilation = {2, 2}}},
      {"groups", 4, 6, 3, {.padding = {1, 1}, .groups = 2}},
      {"no_bias", 3, 4, 1, {.bias = false}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    manual_seed(4);
    auto conv = std::make_shared<nn::Conv2d>(c.in, c.out, c.kernel, c.options);
    Lambda m([conv](const Tensor& x) { return conv->forward(x); }, {{"conv", conv}});
    const std::int64_t channels = c.in;
    expect_runtime_agrees(m, [channels](std::int64_t n) { return images(n, channels); });
  }
}

struct ConvTransposeCase {
  const char* name;
  std::int64_t in, out, kernel;
  nn::ConvTranspose2dOptions options;
};

// nn::ConvTranspose2d as ONNX's ConvTranspose (onnx/layer_export.h).
TEST_F(OnnxOps, ConvTranspose) {
  const ConvTransposeCase cases[] = {
      {"plain", 3, 4, 3, {}},
      {"stride_padding", 3, 5, 3, {.stride = {2, 2}, .padding = {1, 1}}},
      {"output_padding", 3, 4, 3, {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}}},
      {"rectangular", 3, 4, 3, {.stride = {1, 2}, .padding = {2, 0}, .output_padding = {0, 1}}},
      {"dilation", 3, 4, 3, {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}}},
      {"no_bias", 3, 4, 2, {.stride = {2, 2}, .bias = false}},
  };
  for (const ConvTransposeCase& c : cases) {
    SCOPED_TRACE(c.name);
    manual_seed(5);
    auto deconv = std::make_shared<nn::ConvTranspose2d>(c.in, c.out, c.kernel, c.options);
    Lambda m([deconv](const Tensor& x) { return deconv->forward(x); }, {{"deconv", deconv}});
    const std::int64_t channels = c.in;
    expect_runtime_agrees(m, [channels](std::int64_t n) { return images(n, channels, 5, 6); });
  }
}

TEST_F(OnnxOps, MaxPool) {
  Lambda plain([](const Tensor& x) { return max_pool2d(x, {2, 2}); });
  expect_runtime_agrees(plain, [](std::int64_t n) { return images(n); });
  Lambda strided([](const Tensor& x) { return max_pool2d(x, {3, 3}, Pair{2, 2}, {1, 1}); });
  expect_runtime_agrees(strided, [](std::int64_t n) { return images(n); });
}

TEST_F(OnnxOps, FlattenAndReshape) {
  Lambda flatten([](const Tensor& x) { return x.flatten(1); });
  expect_runtime_agrees(flatten, [](std::int64_t n) { return images(n); });
  Lambda reshape([](const Tensor& x) { return x.reshape({-1, 9, 27}).relu(); });
  expect_runtime_agrees(reshape, [](std::int64_t n) { return images(n); });
}

TEST_F(OnnxOps, ElementwiseWithBroadcasting) {
  manual_seed(5);
  const Tensor row = randn({5});
  const Tensor column = randn({4, 1}).abs() + 0.5;
  nn::Module none("None");
  expect_runtime_agrees(
      none,
      [row, column](const std::vector<Tensor>& x) {
        const Tensor a = x[0], b = x[1];
        return std::vector<Tensor>{(a + b) * row - b / column, a.sub(2.5).mul(b.exp()), (a - row).abs().pow(1.5),
                                   maximum(a, b) + minimum(a, row).neg()};
      },
      [](std::int64_t n) { return std::vector<Tensor>{randn({n, 4, 5}), randn({n, 1, 5})}; });
}

TEST_F(OnnxOps, CastsSqueezeAndUnsqueeze) {
  Lambda m([](const Tensor& x) {
    const Tensor wide = x.unsqueeze(1).to(kFloat64) * 3.0;     // [N, 1, 6] Float64
    return (wide.squeeze(1) > 0.5).to(kFloat32) + wide.squeeze(1).to(kFloat32);
  });
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 6}); });
}

TEST_F(OnnxOps, FashionNormalisation) {
  Lambda m([](const Tensor& x) { return (x - 0.2860) / 0.3530; });
  expect_runtime_agrees(m, [](std::int64_t n) { return rand({n, 1, 28, 28}); });
}

TEST_F(OnnxOps, BatchNormInEval) {
  manual_seed(6);
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  {
    // Running statistics and affine terms away from their initial 0, 1.
    NoGradGuard no_grad;
    bn->running_mean.copy_(randn({3}));
    bn->running_var.copy_(rand({3}) + 0.5);
    bn->weight.copy_(randn({3}));
    bn->bias.copy_(randn({3}));
  }
  Lambda m([bn](const Tensor& x) { return bn->forward(x); }, {{"bn", bn}});
  expect_runtime_agrees(m, [](std::int64_t n) { return images(n); });
}

TEST_F(OnnxOps, SoftmaxAndLogSoftmax) {
  Lambda m([](const Tensor& x) { return softmax(x, 1) + log_softmax(x, -1); });
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 6, 6}); });
}

TEST_F(OnnxOps, Activations) {
  Lambda tanh_sigmoid([](const Tensor& x) { return tanh(x) * sigmoid(x); });
  expect_runtime_agrees(tanh_sigmoid, [](std::int64_t n) { return randn({n, 13}); });
  Lambda gelu_leaky([](const Tensor& x) { return gelu(x) + leaky_relu(x, 0.2); });
  expect_runtime_agrees(gelu_leaky, [](std::int64_t n) { return randn({n, 13}); });
}

TEST_F(OnnxOps, AveragePools) {
  Lambda average([](const Tensor& x) { return avg_pool2d(x, {3, 3}, Pair{2, 2}, {1, 1}); });
  expect_runtime_agrees(average, [](std::int64_t n) { return images(n); });
  Lambda average_skipping_padding([](const Tensor& x) { return avg_pool2d(x, {3, 3}, Pair{2, 2}, {1, 1}, false); });
  expect_runtime_agrees(average_skipping_padding, [](std::int64_t n) { return images(n); });
  Lambda global([](const Tensor& x) { return adaptive_avg_pool2d(x, {1, 1}).flatten(1); });
  expect_runtime_agrees(global, [](std::int64_t n) { return images(n); });
}

TEST_F(OnnxOps, DropoutIsDroppedInEval) {
  auto dropout = std::make_shared<nn::Dropout>(0.5);
  Lambda m([dropout](const Tensor& x) { return dropout->forward(x) * 2.0; }, {{"dropout", dropout}});
  m.train();  // export_model puts it in eval mode itself
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 10}); });
}

TEST_F(OnnxOps, TransposeConcatSlice) {
  Lambda m([](const Tensor& x) {
    const Tensor t = x.transpose(1, 2);                        // [N, 5, 4]
    const Tensor s = t.narrow(1, 1, 3);                        // [N, 3, 4]
    return cat({s, x.narrow(2, 0, 4).transpose(1, 2).relu()}, 1);  // [N, 7, 4]
  });
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 4, 5}); });
}

TEST_F(OnnxOps, Embedding) {
  manual_seed(7);
  auto embedding = std::make_shared<nn::Embedding>(11, 6);
  Lambda m([embedding](const Tensor& ids) { return embedding->forward(ids); }, {{"embedding", embedding}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randint(0, 11, {n, 5}); });
}

TEST_F(OnnxOps, LayerNorm) {
  manual_seed(8);
  auto norm = std::make_shared<nn::LayerNorm>(Shape{6});
  {
    NoGradGuard no_grad;
    norm->weight.copy_(randn({6}));
    norm->bias.copy_(randn({6}));
  }
  Lambda m([norm](const Tensor& x) { return norm->forward(x); }, {{"norm", norm}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 3, 6}); });
  auto plain = std::make_shared<nn::LayerNorm>(Shape{3, 6}, 1e-5, false);
  Lambda m2([plain](const Tensor& x) { return plain->forward(x); }, {{"norm", plain}});
  expect_runtime_agrees(m2, [](std::int64_t n) { return randn({n, 3, 6}); });
}

}  // namespace
}  // namespace kiln::testing
