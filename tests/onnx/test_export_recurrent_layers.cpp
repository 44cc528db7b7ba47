// tests/onnx/test_export_recurrent_layers.cpp — nn::LSTM, nn::GRU and nn::RNN written as
// ONNX's own LSTM, GRU and RNN nodes (onnx/layer_export.h): one and two layers, one and two directions,
// batch_first or not, with and without initial states, exported at batch 3 and length 6 with
// both axes dynamic and run in ONNX Runtime at batch 1 and 37, length 2 and 9, against Kiln
// (max relative error <= 1e-5); and each file holds one node per layer, not the unrolled steps.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "onnx/onnx_runtime.h"
#include "support/test_util.h"

namespace kiln::testing {
namespace {

using OnnxRecurrentLayers = OnnxRuntimeTest;

constexpr std::int64_t kInput = 5, kHidden = 7;

struct RecurrentCase {
  const char* name;
  nn::RNNBaseOptions options;
  bool initial_state;
};

const RecurrentCase kCases[] = {
    {"one_layer", {}, false},
    {"one_layer_batch_first_with_state", {.batch_first = true}, true},
    {"two_layers_bidirectional_batch_first", {.num_layers = 2, .batch_first = true, .bidirectional = true}, false},
    {"two_layers_bidirectional_with_state", {.num_layers = 2, .bidirectional = true}, true},
    {"two_layers_with_state_no_bias", {.num_layers = 2, .bias = false}, true},
};

/// The ops of the file at `path`, counted.
std::map<std::string, int> op_counts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ::onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in)) << path;
  std::map<std::string, int> ops;
  for (const ::onnx::NodeProto& n : model.graph().node()) ++ops[n.op_type()];
  return ops;
}

/// x (and h0, c0 when the case gives them) at a batch size and a sequence length.
MakeSequenceInputs inputs_for(const RecurrentCase& c, int states) {
  return [c, states](std::int64_t batch, std::int64_t length) {
    const std::int64_t rows = c.options.num_layers * (c.options.bidirectional ? 2 : 1);
    std::vector<Tensor> x = {c.options.batch_first ? randn({batch, length, kInput}) : randn({length, batch, kInput})};
    for (int s = 0; c.initial_state && s < states; ++s) x.push_back(randn({rows, batch, kHidden}));
    return x;
  };
}

/// Each input's batch dim: x's (0 when batch_first, else 1), then the states' (1).
std::vector<std::int64_t> batch_dims_for(const RecurrentCase& c, int states) {
  std::vector<std::int64_t> dims = {c.options.batch_first ? 0 : 1};
  for (int s = 0; c.initial_state && s < states; ++s) dims.push_back(1);
  return dims;
}

TEST_F(OnnxRecurrentLayers, LstmIsOneOnnxLstmNodePerLayer) {
  for (const RecurrentCase& c : kCases) {
    SCOPED_TRACE(c.name);
    manual_seed(40);
    auto lstm = std::make_shared<nn::LSTM>(kInput, kHidden, c.options);
    Lambda owner([](const Tensor& x) { return x; }, {{"lstm", lstm}});
    const onnx::Forward forward = [lstm](const std::vector<Tensor>& x) {
      const auto [y, state] = x.size() == 3 ? (*lstm)(x[0], {x[1], x[2]}) : (*lstm)(x[0]);
      return std::vector<Tensor>{y, std::get<0>(state), std::get<1>(state)};
    };
    const std::string path =
        expect_runtime_agrees_over_sequences(owner, forward, inputs_for(c, 2), batch_dims_for(c, 2));
    const std::map<std::string, int> ops = op_counts(path);
    EXPECT_EQ(ops.count("LSTM") ? ops.at("LSTM") : 0, c.options.num_layers);
    // Not the unrolled steps: no gate arithmetic outside the LSTM nodes.
    EXPECT_EQ(ops.count("Sigmoid") + ops.count("Tanh") + ops.count("MatMul"), 0u);
  }
}

TEST_F(OnnxRecurrentLayers, GruIsOneOnnxGruNodePerLayer) {
  for (const RecurrentCase& c : kCases) {
    SCOPED_TRACE(c.name);
    manual_seed(41);
    auto gru = std::make_shared<nn::GRU>(kInput, kHidden, c.options);
    Lambda owner([](const Tensor& x) { return x; }, {{"gru", gru}});
    const onnx::Forward forward = [gru](const std::vector<Tensor>& x) {
      const auto [y, h_n] = (*gru)(x[0], x.size() == 2 ? x[1] : Tensor());
      return std::vector<Tensor>{y, h_n};
    };
    const std::string path =
        expect_runtime_agrees_over_sequences(owner, forward, inputs_for(c, 1), batch_dims_for(c, 1));
    const std::map<std::string, int> ops = op_counts(path);
    EXPECT_EQ(ops.count("GRU") ? ops.at("GRU") : 0, c.options.num_layers);
    EXPECT_EQ(ops.count("Sigmoid") + ops.count("Tanh") + ops.count("MatMul"), 0u);
  }
}

// Inside a model the layer is one node too, and the file fixes nothing but what the model's own
// other nodes fix (here the sequence stays fixed: only the batch axis is named).
TEST_F(OnnxRecurrentLayers, LstmInsideAModelKeepsItsOtherNodes) {
  manual_seed(42);
  auto embedding = std::make_shared<nn::Embedding>(11, kInput);
  auto lstm = std::make_shared<nn::LSTM>(kInput, kHidden, nn::RNNBaseOptions{.num_layers = 2, .batch_first = true});
  auto head = std::make_shared<nn::Linear>(kHidden, 11);
  Lambda m([=](const Tensor& ids) { return (*head)(std::get<0>((*lstm)((*embedding)(ids)))); },
           {{"embedding", embedding}, {"lstm", lstm}, {"head", head}});
  const std::string path = expect_runtime_agrees(m, [](std::int64_t n) { return randint(0, 11, {n, 6}); });
  EXPECT_EQ(op_counts(path).at("LSTM"), 2);
}

TEST_F(OnnxRecurrentLayers, RnnIsOneOnnxRnnNodePerLayer) {
  for (const char* nonlinearity : {"tanh", "relu"}) {
    for (RecurrentCase c : kCases) {
      c.options.nonlinearity = nonlinearity;
      SCOPED_TRACE(std::string(c.name) + " " + nonlinearity);
      manual_seed(43);
      auto rnn = std::make_shared<nn::RNN>(kInput, kHidden, c.options);
      Lambda owner([](const Tensor& x) { return x; }, {{"rnn", rnn}});
      const onnx::Forward forward = [rnn](const std::vector<Tensor>& x) {
        const auto [y, h_n] = (*rnn)(x[0], x.size() == 2 ? x[1] : Tensor());
        return std::vector<Tensor>{y, h_n};
      };
      const std::string path =
          expect_runtime_agrees_over_sequences(owner, forward, inputs_for(c, 1), batch_dims_for(c, 1));
      const std::map<std::string, int> ops = op_counts(path);
      EXPECT_EQ(ops.count("RNN") ? ops.at("RNN") : 0, c.options.num_layers);
      EXPECT_EQ(ops.count("Relu") + ops.count("Tanh") + ops.count("MatMul"), 0u);
    }
  }
}

// A dynamic sequence axis that another node would fix is refused, naming the node.
TEST(OnnxRecurrentLayerErrors, ASequenceAxisAnotherNodeFixesIsRefused) {
  auto gru = std::make_shared<nn::GRU>(kInput, kHidden);
  Lambda last([gru](const Tensor& x) { return std::get<0>((*gru)(x)).select(0, -1); }, {{"gru", gru}});
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_sequence_refused.onnx").string();
  const std::string message = error_of<NotImplementedError>([&] {
    onnx::export_model(last, {randn({6, 3, kInput})}, path, {.dynamic_axes = {"batch", "sequence"}, .batch_dims = {1}});
  });
  EXPECT_NE(message.find("is the dynamic sequence axis 'sequence', and would fix its length"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace kiln::testing
