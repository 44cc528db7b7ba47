// tests/nn/test_rnn.cpp — RNN, LSTM, GRU and their cells against PyTorch: the same state-dict
// keys, and PyTorch's outputs (tests/nn/rnn_reference.h, from tools/rnn_reference.py) for
// weights and inputs given by a formula both sides compute; gradcheck in Float64; PyTorch's
// errors for bad shapes and options.
#include <gtest/gtest.h>

#include "autograd/gradcheck.h"
#include "kiln.h"
#include "nn/formula.h"
#include "nn/rnn_reference.h"
#include "support/test_util.h"

namespace kiln {
namespace {

namespace ref = rnn_reference;

using testing::expect_equals_reference;
using testing::formula;
using testing::load_formula;

TEST(Rnn, LstmMatchesPyTorchWithItsStateDictKeys) {
  nn::LSTM lstm(3, 4, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  EXPECT_EQ(lstm.state_dict().keys(), ref::lstm_keys);
  load_formula(lstm);
  const Tensor x = formula({2, 5, 3}, 1);
  const auto [output, state] = lstm.forward(x, std::tuple{formula({4, 2, 4}, 2), formula({4, 2, 4}, 3)});
  const auto& [h_n, c_n] = state;
  EXPECT_EQ(output.sizes(), IntArrayRef({2, 5, 8}));
  expect_equals_reference(output, ref::lstm_output);
  expect_equals_reference(h_n, ref::lstm_h_n);
  expect_equals_reference(c_n, ref::lstm_c_n);
  output.sum().backward();
  expect_equals_reference(lstm.named_parameters()[13].second.grad(), ref::lstm_grad_weight_hh_l1_reverse);
  EXPECT_EQ(lstm.named_parameters()[13].first, "weight_hh_l1_reverse");
}

TEST(Rnn, GruMatchesPyTorchWithItsStateDictKeys) {
  nn::GRU gru(3, 4, {.num_layers = 2});
  EXPECT_EQ(gru.state_dict().keys(), ref::gru_keys);
  load_formula(gru);
  const auto [output, h_n] = gru.forward(formula({5, 2, 3}, 1));
  expect_equals_reference(output, ref::gru_output);
  expect_equals_reference(h_n, ref::gru_h_n);
}

TEST(Rnn, BidirectionalReluRnnOnAnUnbatchedSequenceMatchesPyTorch) {
  nn::RNN rnn(3, 4, {.bidirectional = true, .nonlinearity = "relu"});
  load_formula(rnn);
  const auto [output, h_n] = rnn.forward(formula({5, 3}, 1), formula({2, 4}, 2));
  EXPECT_EQ(output.sizes(), IntArrayRef({5, 8}));
  EXPECT_EQ(h_n.sizes(), IntArrayRef({2, 4}));
  expect_equals_reference(output, ref::rnn_output);
  expect_equals_reference(h_n, ref::rnn_h_n);
}

TEST(Rnn, CellsMatchPyTorch) {
  const Tensor x = formula({2, 3}, 1), h = formula({2, 4}, 2), c = formula({2, 4}, 3);
  nn::LSTMCell lstm(3, 4);
  load_formula(lstm);
  const auto [h1, c1] = lstm.forward(x, std::tuple{h, c});
  expect_equals_reference(h1, ref::lstm_cell_h);
  expect_equals_reference(c1, ref::lstm_cell_c);
  nn::GRUCell gru(3, 4);
  load_formula(gru);
  expect_equals_reference(gru.forward(x, h), ref::gru_cell_h);
  nn::RNNCell rnn(3, 4);
  load_formula(rnn);
  expect_equals_reference(rnn.forward(x, h), ref::rnn_cell_h);
  EXPECT_EQ(rnn.named_parameters()[0].first, "weight_ih");
}

TEST(Rnn, BatchFirstIsATransposeOfTheSameComputation) {
  manual_seed(0);
  nn::GRU seq_first(3, 5, {.num_layers = 2, .bidirectional = true});
  nn::GRU batch_first(3, 5, {.num_layers = 2, .batch_first = true, .bidirectional = true});
  batch_first.load_state_dict(seq_first.state_dict());
  const Tensor x = randn({6, 2, 3});
  const auto [a, ha] = seq_first.forward(x);
  const auto [b, hb] = batch_first.forward(x.transpose(0, 1));
  EXPECT_TRUE(equal(a, b.transpose(0, 1)));
  EXPECT_TRUE(equal(ha, hb));  // states are [layers * directions, batch, hidden] either way
}

TEST(Rnn, InitialisationIsPyTorchsUniformRange) {
  manual_seed(0);
  nn::LSTM lstm(10, 16, {.num_layers = 2});
  for (const auto& [name, p] : lstm.named_parameters()) {
    EXPECT_LE(p.abs().max().item<double>(), 0.25) << name;  // 1 / sqrt(16)
    EXPECT_GT(p.abs().max().item<double>(), 0.2) << name;
  }
  EXPECT_EQ(lstm.named_parameters()[4].second.sizes(), IntArrayRef({64, 16}));  // weight_ih_l1: 4H x H
}

TEST(Rnn, DropoutActsBetweenLayersOnlyInTraining) {
  manual_seed(0);
  nn::LSTM lstm(4, 6, {.num_layers = 3, .dropout = 0.5});
  const Tensor x = randn({7, 2, 4});
  lstm.eval();
  // Equal up to the GEMM's rounding: on a busy machine the adaptive thread count may change
  // between the two calls, and with it how the products are split.
  const Tensor a = std::get<0>(lstm.forward(x)), b = std::get<0>(lstm.forward(x));
  EXPECT_TRUE(allclose(a, b, 1e-5, 1e-6));
  lstm.train();
  manual_seed(1);
  const Tensor c = std::get<0>(lstm.forward(x));
  EXPECT_FALSE(allclose(a, c, 1e-2, 1e-2));
}

TEST(Rnn, GradcheckThroughTimeInFloat64) {
  manual_seed(0);
  for (const bool bidirectional : {false, true}) {
    nn::LSTM lstm(2, 3, {.num_layers = 2, .bidirectional = bidirectional});
    nn::GRU gru(2, 3, {.bidirectional = bidirectional});
    nn::RNN rnn(2, 3, {.num_layers = 2, .bidirectional = bidirectional});
    for (nn::Module* m : {static_cast<nn::Module*>(&lstm), static_cast<nn::Module*>(&gru), static_cast<nn::Module*>(&rnn)}) {
      m->to(kFloat64);
    }
    const std::int64_t layers = bidirectional ? 4 : 2;
    const Tensor x = randn({4, 2, 2}, TensorOptions().dtype(kFloat64).requires_grad(true));
    const Tensor h0 = randn({layers, 2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true));
    const Tensor c0 = randn({layers, 2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true));
    EXPECT_TRUE(autograd::gradcheck(
        [&](const TensorList& in) {
          const auto [out, state] = lstm.forward(in[0], std::tuple{in[1], in[2]});
          return out.sum() + std::get<1>(state).pow(2).sum();
        },
        {x, h0, c0}));
    const Tensor g0 = randn({bidirectional ? 2 : 1, 2, 3}, TensorOptions().dtype(kFloat64).requires_grad(true));
    EXPECT_TRUE(autograd::gradcheck([&](const TensorList& in) { return std::get<0>(gru.forward(in[0], in[1])); },
                                    {x, g0}));
    EXPECT_TRUE(autograd::gradcheck([&](const TensorList& in) { return std::get<1>(rnn.forward(in[0], in[1])); },
                                    {x, h0}));
  }
  nn::LSTMCell cell(2, 3);
  cell.to(kFloat64);
  const Tensor x = randn({2, 2}, TensorOptions().dtype(kFloat64).requires_grad(true));
  EXPECT_TRUE(autograd::gradcheck(
      [&](const TensorList& in) { return std::get<1>(cell.forward(in[0])) + std::get<0>(cell.forward(in[0])); },
      {x}));
}

/// The LSTM recurrence as differentiable ops, one step at a time: what the fused layer replaces.
TensorList lstm_step_by_step(const Tensor& projected, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                             bool reverse) {
  const std::int64_t steps = projected.size(0);
  Tensor h = h0, c = c0;
  TensorList out(static_cast<std::size_t>(steps));
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::int64_t t = reverse ? steps - 1 - s : s;
    std::tie(h, c) = lstm_cell_from_gates(h.mm(w_hh.t()) + projected.select(0, t), c);
    out[static_cast<std::size_t>(t)] = h;
  }
  return {stack(out, 0), h, c};
}

TEST(Rnn, FusedLstmLayerMatchesTheStepByStepOpsForwardAndBackward) {
  manual_seed(3);
  const TensorOptions f64 = TensorOptions().dtype(kFloat64).requires_grad(true);
  for (const bool reverse : {false, true}) {
    const Tensor projected = randn({6, 3, 20}, f64), h0 = randn({3, 5}, f64), c0 = randn({3, 5}, f64),
                 w_hh = randn({20, 5}, f64);
    const TensorList fused = lstm_layer(projected, h0, c0, w_hh, reverse);
    ASSERT_EQ(fused[0].grad_fn()->name(), std::string("LstmLayerBackward0"));
    const TensorList composed = lstm_step_by_step(projected, h0, c0, w_hh, reverse);
    // A loss that reaches every output, with the output's gradient non-contiguous.
    const Tensor weights = randn({3, 6, 5}, TensorOptions().dtype(kFloat64)).transpose(0, 1);
    auto loss = [&](const TensorList& o) { return (o[0] * weights).sum() + o[1].pow(2).sum() + o[2].tanh().sum(); };
    const TensorList inputs{projected, h0, c0, w_hh};
    const TensorList grads_fused = autograd::grad(TensorList{loss(fused)}, inputs);
    const TensorList grads_composed = autograd::grad(TensorList{loss(composed)}, inputs);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(allclose(fused[i], composed[i], 1e-13, 1e-13)) << i;
    for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(allclose(grads_fused[i], grads_composed[i], 1e-12, 1e-12)) << i;
  }
}

TEST(Rnn, FusedLstmLayerIsTwiceDifferentiable) {
  manual_seed(4);
  const TensorOptions f64 = TensorOptions().dtype(kFloat64).requires_grad(true);
  const TensorList inputs{randn({3, 2, 8}, f64), randn({2, 2}, f64), randn({2, 2}, f64), randn({8, 2}, f64)};
  for (const bool reverse : {false, true}) {
    auto fn = [&](const TensorList& in) {
      const TensorList out = lstm_layer(in[0], in[1], in[2], in[3], reverse);
      return out[0].sum() + out[2].pow(2).sum();
    };
    EXPECT_TRUE(autograd::gradcheck(fn, inputs));
    EXPECT_TRUE(autograd::gradgradcheck(fn, inputs));
  }
}

TEST(Rnn, LstmAllocatesNothingPerTimeStep) {
  // Forward and backward of a longer sequence make exactly as many allocations as a shorter
  // one: the buffers are per call, not per step.
  manual_seed(5);
  nn::LSTM lstm(8, 16, {.bidirectional = true});
  auto allocations_for = [&](std::int64_t steps) {
    const Tensor x = randn({steps, 4, 8});
    lstm.zero_grad();
    const std::int64_t before = cpu_allocator_stats().allocations;
    const auto [out, state] = lstm.forward(x);
    (out.sum() + std::get<1>(state).sum()).backward();
    return cpu_allocator_stats().allocations - before;
  };
  allocations_for(4);  // first-call work (gradient buffers) out of the way
  EXPECT_EQ(allocations_for(4), allocations_for(32));
}

TEST(Rnn, GruAndRnnTakeTheirStepsWithOneUnbindNotASelectEach) {
  // A select per step would zero a whole [T, B, G] copy of the projections in each step's
  // backward (Note [One node for the pieces]): quadratic in T.
  manual_seed(6);
  const Tensor x = randn({7, 2, 4});
  nn::GRU gru(4, 6);
  nn::RNN rnn(4, 6, {.num_layers = 2});
  const std::string gru_graph = autograd::to_dot(std::get<0>(gru.forward(x)).sum());
  EXPECT_EQ(testing::occurrences(gru_graph, "UnbindBackward0"), 1u);
  EXPECT_EQ(testing::occurrences(gru_graph, "SelectBackward0"), 0u);
  const std::string rnn_graph = autograd::to_dot(std::get<0>(rnn.forward(x)).sum());
  EXPECT_EQ(testing::occurrences(rnn_graph, "UnbindBackward0"), 2u);  // one per layer
  EXPECT_EQ(testing::occurrences(rnn_graph, "SelectBackward0"), 0u);
}

TEST(Rnn, BadInputsGetPyTorchsErrors) {
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  EXPECT_ERROR(lstm.forward(randn({2, 5, 3, 1})), "LSTM: Expected input to be 2D or 3D, got 4D input instead");
  EXPECT_ERROR(lstm.forward(randn({5, 2, 7})), "input.size(-1) must be equal to input_size. Expected 3, got 7");
  EXPECT_ERROR(lstm.forward(randn({5, 2, 3}), std::tuple{randn({1, 2, 4}), randn({2, 2, 4})}),
                   "Expected hidden[0] size (2, 2, 4), got [1, 2, 4]");
  EXPECT_ERROR(lstm.forward(randn({5, 2, 3}), std::tuple{randn({2, 4}), randn({2, 2, 4})}),
                   "For batched 3-D input, hx and cx should also be 3-D but got (2-D, 3-D) tensors");
  nn::GRU gru(3, 4);
  EXPECT_ERROR(gru.forward(randn({5, 3}), randn({1, 1, 4})),
                   "For unbatched 2-D input, hx should also be 2-D but got 3-D tensor");
  EXPECT_ERROR(nn::RNN(3, 4, {.nonlinearity = "sigmoid"}), "Unknown nonlinearity 'sigmoid'");
  EXPECT_ERROR(nn::GRU(3, 4, {.dropout = 1.5}), "dropout should be a number in range [0, 1]");
  nn::GRUCell cell(3, 4);
  EXPECT_ERROR(cell.forward(randn({2, 2, 3}), Tensor()), "GRUCell: Expected input to be 1-D or 2-D but received 3-D tensor");
  EXPECT_ERROR(cell.forward(randn({2, 3}), randn({3, 4})), "Input batch size 2 doesn't match hidden batch size 3");
}

TEST(Rnn, PrintsLikePyTorch) {
  EXPECT_EQ(nn::LSTM(128, 256, {.num_layers = 2, .batch_first = true}).repr(),
            "LSTM(128, 256, num_layers=2, batch_first=True)");
  EXPECT_EQ(nn::RNNCell(3, 4, true, "relu").repr(), "RNNCell(3, 4, nonlinearity=relu)");
}

}  // namespace
}  // namespace kiln
