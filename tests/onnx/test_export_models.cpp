// tests/onnx/test_export_models.cpp — the examples' models exported whole (the programs'
// normalisation inside the graph) and run in ONNX Runtime. What the written file holds, how
// long the CNN's export takes and export's errors are in test_export_file.cpp.
#include "examples/support/models.h"
#include "onnx/onnx_runtime.h"
#include "support/test_util.h"

namespace kiln::testing {
namespace {

using OnnxModels = OnnxRuntimeTest;

Tensor pixels(std::int64_t n) { return rand({n, 1, 28, 28}); }

/// The CNN of examples/support/models.h with batch normalisation after each convolution.
struct CnnWithBatchNorm : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::Linear> fc;
  CnnWithBatchNorm() : Module("CnnWithBatchNorm") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 8, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(8));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(8, 16, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(16));
    fc = register_module("fc", std::make_shared<nn::Linear>(16 * 7 * 7, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(bn1->forward(conv1->forward(examples::normalize_fashion(x))).relu(), {2, 2});
    h = max_pool2d(bn2->forward(conv2->forward(h)).relu(), {2, 2});
    return fc->forward(h.flatten(1));
  }
};

TEST_F(OnnxModels, MlpWithItsNormalisation) {
  manual_seed(10);
  auto mlp = std::make_shared<examples::Mlp>();
  Lambda m([mlp](const Tensor& x) { return mlp->forward(examples::normalize_fashion(x).flatten(1)); },
           {{"model", mlp}});
  expect_runtime_agrees(m, pixels);
}

TEST_F(OnnxModels, CnnWithItsNormalisation) {
  manual_seed(11);
  auto cnn = std::make_shared<examples::Cnn>();
  Lambda m([cnn](const Tensor& x) { return cnn->forward(examples::normalize_fashion(x)); }, {{"model", cnn}});
  expect_runtime_agrees(m, pixels);
}

TEST_F(OnnxModels, CnnWithBatchNorm) {
  manual_seed(12);
  CnnWithBatchNorm m;
  {
    // A few training-mode batches move the running statistics away from 0 and 1.
    NoGradGuard no_grad;
    for (int i = 0; i < 3; ++i) m.forward(pixels(16));
  }
  expect_runtime_agrees(m, pixels);
}

}  // namespace
}  // namespace kiln::testing
