// tests/onnx/test_export_sequence_models.cpp — attention (with a causal mask), the Transformer
// encoder layer exported decomposed into ONNX's elementwise, MatMul, Softmax and
// LayerNormalization nodes, and the GRU and the LSTM inside models (as ONNX's GRU and LSTM
// nodes, onnx/layer_export.h), run in ONNX Runtime at batch 1 and 37 against Kiln (see
// tests/onnx/onnx_runtime.h; tests/onnx/test_export_recurrent_layers.cpp for the layers' options).
#include "onnx/onnx_runtime.h"
#include "support/test_util.h"

namespace kiln::testing {
namespace {

using OnnxSequenceModels = OnnxRuntimeTest;

TEST_F(OnnxSequenceModels, MultiheadAttention) {
  manual_seed(30);
  auto attention = std::make_shared<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionArgs{.batch_first = true});
  Lambda m([attention](const Tensor& x) { return std::get<0>(attention->forward(x, x, x, {.need_weights = false})); },
           {{"attention", attention}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 5, 8}); });
}

TEST_F(OnnxSequenceModels, MultiheadAttentionWithACausalMask) {
  manual_seed(31);
  auto attention = std::make_shared<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionArgs{.batch_first = true});
  const Tensor mask = nn::generate_square_subsequent_mask(5);
  Lambda m(
      [attention, mask](const Tensor& x) {
        return std::get<0>(attention->forward(x, x, x, {.need_weights = false, .attn_mask = mask}));
      },
      {{"attention", attention}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 5, 8}); });
}

TEST_F(OnnxSequenceModels, MultiheadAttentionWithAKeyPaddingMask) {
  manual_seed(35);
  auto attention = std::make_shared<nn::MultiheadAttention>(8, 2, nn::MultiheadAttentionArgs{.batch_first = true});
  Lambda owner([](const Tensor& x) { return x; }, {{"attention", attention}});
  expect_runtime_agrees(
      owner,
      [attention](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{
            std::get<0>(attention->forward(x[0], x[0], x[0], {.key_padding_mask = x[1], .need_weights = false}))};
      },
      [](std::int64_t n) {
        // Each sequence pads its last one or two positions (never all of them).
        const Tensor mask = arange(5).reshape({1, 5}) >= (randint(3, 5, {n, 1}));
        return std::vector<Tensor>{randn({n, 5, 8}), mask};
      });
}

TEST_F(OnnxSequenceModels, TransformerEncoderLayer) {
  manual_seed(32);
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(
      8, 2, nn::TransformerEncoderLayerArgs{.dim_feedforward = 16, .activation = "gelu", .batch_first = true});
  Lambda m([layer](const Tensor& x) { return layer->forward(x); }, {{"layer", layer}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 5, 8}); });
}

// As train_charlm's Transformer: positions from arange and the causal mask made inside the
// forward, so the file computes them too.
TEST_F(OnnxSequenceModels, PositionsAndCausalMaskMadeInTheForward) {
  manual_seed(36);
  auto token = std::make_shared<nn::Embedding>(11, 8);
  auto position = std::make_shared<nn::Embedding>(6, 8);
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(
      8, 2, nn::TransformerEncoderLayerArgs{.dim_feedforward = 16, .batch_first = true});
  Lambda m(
      [=](const Tensor& ids) {
        const std::int64_t length = ids.size(1);
        const Tensor x = token->forward(ids) + position->forward(arange(length, TensorOptions().dtype(kInt64)));
        return layer->forward(x, nn::generate_square_subsequent_mask(length));
      },
      {{"token", token}, {"position", position}, {"layer", layer}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randint(0, 11, {n, 6}); });
}

TEST_F(OnnxSequenceModels, Gru) {
  manual_seed(33);
  // No dim of 3, the example batch: the zero initial state [1, N, 7] is found by its size.
  auto gru = std::make_shared<nn::GRU>(5, 7, nn::RNNBaseOptions{.batch_first = true});
  Lambda m([gru](const Tensor& x) { return std::get<0>(gru->forward(x)); }, {{"gru", gru}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 4, 5}); });
}

TEST_F(OnnxSequenceModels, Lstm) {
  manual_seed(34);
  // No dim of 3, the example batch (Note [The batch axis]).
  auto lstm = std::make_shared<nn::LSTM>(5, 7, nn::RNNBaseOptions{.batch_first = true});
  Lambda m([lstm](const Tensor& x) { return std::get<0>(lstm->forward(x)); }, {{"lstm", lstm}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 4, 5}); });
}

TEST_F(OnnxSequenceModels, TwoLayerBidirectionalLstm) {
  manual_seed(37);
  // batch_first: the dynamic axis is dim 0 of the inputs.
  auto lstm = std::make_shared<nn::LSTM>(
      5, 7, nn::RNNBaseOptions{.num_layers = 2, .batch_first = true, .bidirectional = true});
  Lambda m([lstm](const Tensor& x) { return std::get<0>(lstm->forward(x)); }, {{"lstm", lstm}});
  expect_runtime_agrees(m, [](std::int64_t n) { return randn({n, 4, 5}); });
}

}  // namespace
}  // namespace kiln::testing
