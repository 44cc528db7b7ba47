// tests/nn/test_pytorch_calls.cpp — sequence layers built and called the way PyTorch users write
// them: `lstm(x, {h0, c0})` with structured bindings, LibTorch's fluent LSTMOptions/GRUOptions,
// `mha(q, k, v, {.need_weights = false, ...})`, TransformerEncoderLayer(d_model, nhead, {...}) and
// TransformerEncoder(layer, num_layers) copying the layer. Each call is checked against forward.
#include <gtest/gtest.h>

#include <cmath>
#include <type_traits>

#include "kiln.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;
using testing::values;

// A layer with several outputs returns a tuple from its call, so `Tensor y = lstm(x);` is a
// compile error rather than the run-time "has no single-input forward()" it used to be.
static_assert(!std::is_convertible_v<std::invoke_result_t<nn::LSTM&, const Tensor&>, Tensor>);
static_assert(!std::is_constructible_v<Tensor, std::invoke_result_t<nn::LSTM&, const Tensor&>>);
static_assert(!std::is_convertible_v<std::invoke_result_t<nn::GRU&, const Tensor&>, Tensor>);
static_assert(!std::is_convertible_v<std::invoke_result_t<nn::RNN&, const Tensor&>, Tensor>);
static_assert(!std::is_convertible_v<
              std::invoke_result_t<nn::MultiheadAttention&, const Tensor&, const Tensor&, const Tensor&>, Tensor>);
// A single-output layer's call still is a Tensor.
static_assert(std::is_same_v<std::invoke_result_t<nn::TransformerEncoder&, const Tensor&, const Tensor&>, Tensor>);

TEST(PyTorchCalls, LstmCalledWithAndWithoutAState) {
  manual_seed(0);
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  const Tensor x = randn({5, 2, 3});
  auto [out, state] = lstm(x);
  auto [h, c] = state;
  const auto [ref_out, ref_state] = lstm.forward(x);
  EXPECT_TRUE(tensors_near(out, ref_out, 0.0));
  EXPECT_TRUE(tensors_near(h, std::get<0>(ref_state), 0.0));
  EXPECT_TRUE(tensors_near(c, std::get<1>(ref_state), 0.0));
  EXPECT_EQ(h.sizes(), (Shape{2, 2, 4}));

  // Continuing from the final state equals running the two halves as one sequence.
  const Tensor whole = randn({6, 2, 3});
  auto [first, mid] = lstm(whole.narrow(0, 0, 3));
  auto [h_mid, c_mid] = mid;
  auto [second, last] = lstm(whole.narrow(0, 3, 3), {h_mid, c_mid});
  const auto [all, all_state] = lstm.forward(whole);
  EXPECT_TRUE(tensors_near(second, all.narrow(0, 3, 3), 1e-6));
  EXPECT_TRUE(tensors_near(std::get<1>(last), std::get<1>(all_state), 1e-6));
  EXPECT_TRUE(tensors_near(std::get<0>(lstm.forward(whole.narrow(0, 3, 3), {h_mid, c_mid})), second, 0.0));
}

TEST(PyTorchCalls, GruRnnAndCellsCalledAsForward) {
  manual_seed(1);
  nn::GRU gru(3, 4);
  nn::RNN rnn(3, 4, {.nonlinearity = "relu"});
  const Tensor x = randn({5, 2, 3}), h0 = randn({1, 2, 4});
  auto [gru_out, gru_h] = gru(x, h0);
  EXPECT_TRUE(tensors_near(gru_out, std::get<0>(gru.forward(x, h0)), 0.0));
  EXPECT_TRUE(tensors_near(gru_h, gru_out.select(0, -1).unsqueeze(0), 0.0));  // h_n is the last output
  auto [rnn_out, rnn_h] = rnn(x);
  EXPECT_TRUE(tensors_near(rnn_h, std::get<1>(rnn.forward(x)), 0.0));
  EXPECT_GE(rnn_out.min().item<double>(), 0.0);  // relu

  nn::LSTMCell lstm_cell(3, 4);
  nn::GRUCell gru_cell(3, 4);
  const Tensor step = randn({2, 3}), h = randn({2, 4}), c = randn({2, 4});
  auto [h1, c1] = lstm_cell(step, {h, c});
  EXPECT_TRUE(tensors_near(c1, std::get<1>(lstm_cell.forward(step, std::tuple{h, c})), 0.0));
  EXPECT_EQ(h1.sizes(), (Shape{2, 4}));
  EXPECT_TRUE(tensors_near(gru_cell(step, h), gru_cell.forward(step, h), 0.0));
  EXPECT_TRUE(tensors_near(gru_cell(step), gru_cell.forward(step, zeros({2, 4})), 0.0));
}

TEST(PyTorchCalls, FluentLstmAndGruOptionsInAnyOrder) {
  const nn::LSTMOptions options = nn::LSTMOptions(5, 4).batch_first(true).num_layers(2).dropout(0.25);
  EXPECT_EQ(options.input_size(), 5);
  EXPECT_EQ(options.num_layers(), 2);
  EXPECT_TRUE(options.batch_first());
  nn::LSTM lstm(nn::LSTMOptions(5, 4).num_layers(2).batch_first(true).bias(false));
  EXPECT_EQ(lstm.input_size, 5);
  EXPECT_EQ(lstm.hidden_size, 4);
  EXPECT_EQ(lstm.options.num_layers, 2);
  EXPECT_TRUE(lstm.options.batch_first);
  EXPECT_FALSE(lstm.options.bias);
  EXPECT_EQ(lstm.state_dict().keys(),
            (std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "weight_ih_l1", "weight_hh_l1"}));
  auto [out, state] = lstm(randn({2, 7, 5}));  // batch first
  EXPECT_EQ(out.sizes(), (Shape{2, 7, 4}));

  nn::GRU gru(nn::GRUOptions(3, 6).bidirectional(true));
  EXPECT_EQ(std::get<0>(gru(randn({4, 2, 3}))).sizes(), (Shape{4, 2, 12}));
  EXPECT_EQ(gru.repr(), "GRU(3, 6, bidirectional=True)");
}

TEST(PyTorchCalls, FluentRnnOptionsInAnyOrder) {
  const nn::RNNOptions options = nn::RNNOptions(5, 4).nonlinearity("relu").num_layers(2).batch_first(true);
  EXPECT_EQ(options.hidden_size(), 4);
  EXPECT_EQ(options.nonlinearity(), "relu");
  nn::RNN rnn(nn::RNNOptions(5, 4).batch_first(true).nonlinearity("relu").num_layers(2));
  EXPECT_EQ(rnn.options.num_layers, 2);
  EXPECT_EQ(rnn.options.nonlinearity, "relu");
  // PyTorch's repr leaves the nonlinearity out.
  EXPECT_EQ(rnn.repr(), "RNN(5, 4, num_layers=2, batch_first=True)");
  auto [out, h_n] = rnn(randn({3, 7, 5}));
  EXPECT_EQ(out.sizes(), (Shape{3, 7, 4}));
  EXPECT_EQ(h_n.sizes(), (Shape{2, 3, 4}));
  // The aggregate keeps designated initializers, in its declaration order.
  nn::RNN same(5, 4, nn::RNNBaseOptions{.num_layers = 2, .batch_first = true, .nonlinearity = "relu"});
  EXPECT_EQ(same.repr(), rnn.repr());
  EXPECT_ERROR(nn::RNN(nn::RNNOptions(5, 4).nonlinearity("gelu")), "Unknown nonlinearity 'gelu'");
}

TEST(PyTorchCalls, MultiheadAttentionPositionalAndNamedArguments) {
  manual_seed(2);
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  mha.eval();
  const Tensor q = randn({2, 3, 8}), kv = randn({2, 5, 8});
  const Tensor padding = tensor({{false, false, false, true, true}, {false, false, false, false, false}});
  const Tensor blocked = tensor({{false, true, false, false, false}, {false, false, false, false, false},
                                 {true, false, false, false, false}});
  auto [out, weights] = mha(q, kv, kv);
  EXPECT_TRUE(tensors_near(out, std::get<0>(mha.forward(q, kv, kv)), 0.0));
  EXPECT_EQ(weights.sizes(), (Shape{2, 3, 5}));
  // `{}` is an undefined key_padding_mask, as it was before the options overload existed.
  EXPECT_TRUE(tensors_near(std::get<1>(mha.forward(q, kv, kv, {})), weights, 0.0));
  EXPECT_TRUE(tensors_near(std::get<1>(mha(q, kv, kv, {})), weights, 0.0));

  auto [named, none] = mha(q, kv, kv, {.key_padding_mask = padding, .need_weights = false, .attn_mask = blocked});
  const auto [positional, unused] = mha(q, kv, kv, padding, false, blocked);
  EXPECT_TRUE(tensors_near(named, std::get<0>(mha.forward(q, kv, kv, padding, true, blocked)), 1e-6));
  EXPECT_TRUE(tensors_near(named, positional, 0.0));
  EXPECT_FALSE(none.defined());

  auto [unaveraged_out, per_head] = mha(q, kv, kv, {.attn_mask = blocked, .average_attn_weights = false});
  EXPECT_EQ(per_head.sizes(), (Shape{2, 2, 3, 5}));
  // A blocked key gets no weight in any head.
  EXPECT_EQ(per_head.select(2, 0).select(2, 1).abs().max().item<double>(), 0.0);
}

TEST(PyTorchCalls, TransformerEncoderLayerTakesItsRequiredArgumentsFirst) {
  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .dropout = 0.0, .batch_first = true});
  EXPECT_EQ(layer.options.d_model, 8);
  EXPECT_EQ(layer.options.nhead, 2);
  EXPECT_EQ(layer.options.dim_feedforward, 16);
  EXPECT_EQ(layer.linear1->weight.sizes(), (Shape{16, 8}));
  EXPECT_EQ(layer.self_attn->num_heads, 2);
  EXPECT_ERROR(nn::TransformerEncoderLayer(8, 3), "embed_dim must be divisible by num_heads");
}

TEST(PyTorchCalls, TransformerEncoderCopiesTheLayerIntoEachLayer) {
  // Two calls compared bit for bit need a fixed thread count: a product split across threads
  // rounds its last columns differently (Note [Sharing the machine]).
  set_num_threads(get_num_threads());
  manual_seed(3);
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(8, 2, nn::TransformerEncoderLayerArgs{
                                                                       .dim_feedforward = 16, .batch_first = true});
  layer->to(kFloat64);
  layer->eval();
  const Tensor rng_before = get_rng_state();
  nn::TransformerEncoder encoder(layer, 2);
  // Like PyTorch's deepcopy, copying draws no random numbers.
  EXPECT_TRUE(equal(get_rng_state(), rng_before));
  EXPECT_FALSE(encoder.is_training());
  const StateDict original = layer->state_dict();
  for (std::size_t i = 0; i < 2; ++i) {
    const StateDict copy = (*encoder.layers)[i]->state_dict();
    ASSERT_EQ(copy.keys(), original.keys());
    for (const auto& [name, t] : copy) {
      EXPECT_EQ(t.dtype(), kFloat64) << name;
      EXPECT_TRUE(equal(t, original[name])) << name;
      EXPECT_FALSE(t.shares_memory(original[name])) << name;  // a copy, trained on its own
    }
  }
  const Tensor x = randn({2, 4, 8}, kFloat64);
  const Tensor mask = nn::generate_square_subsequent_mask(4, kFloat64);
  const Tensor y = encoder(x, mask);
  EXPECT_TRUE(tensors_near(y, (*layer)((*layer)(x, mask), mask), 1e-12));
  EXPECT_TRUE(tensors_near(y, encoder.forward(x, mask), 0.0));
  // The causal mask: the first position's output does not depend on later positions.
  const Tensor changed = x.clone();
  changed.select(1, 3).fill_(5.0);
  EXPECT_TRUE(tensors_near(encoder(changed, mask).select(1, 0), y.select(1, 0), 1e-12));
  EXPECT_FALSE(tensors_near(encoder(changed).select(1, 0), y.select(1, 0), 1e-6));
}

TEST(PyTorchCalls, GenerateSquareSubsequentMask) {
  const Tensor mask = nn::generate_square_subsequent_mask(3);
  const double inf = INFINITY;
  EXPECT_EQ(mask.dtype(), kFloat32);
  EXPECT_EQ(values(mask), (std::vector<double>{0, -inf, -inf, 0, 0, -inf, 0, 0, 0}));
}

TEST(PyTorchCalls, FluentAttentionAndEncoderLayerOptionsInAnyOrder) {
  // MultiheadAttentionOptions(6, 3) is LibTorch's (embed_dim, num_heads), not an aggregate's
  // (dropout, bias).
  const nn::MultiheadAttentionOptions o = nn::MultiheadAttentionOptions(6, 3).batch_first(true).dropout(0.25).bias(false);
  EXPECT_EQ(o.embed_dim(), 6);
  EXPECT_EQ(o.num_heads(), 3);
  nn::MultiheadAttention mha(o);
  EXPECT_EQ(mha.embed_dim, 6);
  EXPECT_EQ(mha.num_heads, 3);
  EXPECT_EQ(mha.options.dropout, 0.25);
  EXPECT_FALSE(mha.options.bias);
  EXPECT_TRUE(mha.options.batch_first);
  EXPECT_FALSE(mha.in_proj_bias.defined());

  nn::TransformerEncoderLayer layer(
      nn::TransformerEncoderLayerOptions(8, 2).norm_first(true).activation("gelu").dim_feedforward(16).dropout(0.0));
  EXPECT_EQ(layer.options.d_model, 8);
  EXPECT_EQ(layer.options.nhead, 2);
  EXPECT_EQ(layer.options.dim_feedforward, 16);
  EXPECT_EQ(layer.options.activation, "gelu");
  EXPECT_TRUE(layer.options.norm_first);
  EXPECT_EQ(layer.options.dropout, 0.0);
  EXPECT_EQ(layer.linear1->weight.sizes(), (Shape{16, 8}));
  EXPECT_ERROR(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(8, 2).activation("tanh")),
               "activation should be relu/gelu, not tanh");
}

TEST(PyTorchCalls, NamedParametersAreLookedUpByName) {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  const auto params = lstm.named_parameters();
  EXPECT_EQ(params["weight_hh_l1"].sizes(), (Shape{16, 4}));
  EXPECT_TRUE(params["bias_ih_l0"].is_same(params[2].second));  // still the pairs, in order
  EXPECT_TRUE(params.contains("weight_ih_l1"));
  EXPECT_FALSE(params.contains("weight_ih_l2"));
  EXPECT_EQ(params.keys().front(), "weight_ih_l0");
  EXPECT_ERROR(params["weight_ih_l2"], "no parameter or buffer named 'weight_ih_l2'");
  nn::BatchNorm1d bn(3);
  EXPECT_EQ(values(bn.named_buffers()["running_var"]), (std::vector<double>{1, 1, 1}));
}

}  // namespace
}  // namespace kiln
