// nn/rnn.cpp — one step of each recurrent cell, and the loop over layers, directions and time.
// See Note [Recurrent layers] in nn/rnn.h.
#include "nn/rnn.h"

#include <cmath>

#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/rnn.h"
#include "core/capture_hooks.h"
#include "core/creation.h"
#include "core/shape.h"
#include "core/warning.h"
#include "nn/init.h"

namespace kiln::nn {

namespace {

// One step from `x`, this step's input projection W_ih x_t + b_ih. The expressions follow
// ATen's cells (aten/src/ATen/native/RNN.cpp), so the roundings are the same.

Tensor simple_step(const Tensor& x, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh, bool relu) {
  const Tensor pre = linear(h, w_hh, b_hh) + x;
  return relu ? pre.relu() : pre.tanh();
}

Tensor gru_step(const Tensor& x, const Tensor& h, const Tensor& w_hh, const Tensor& b_hh) {
  const TensorList xs = x.chunk(3, 1);                        // r, z, n of the input
  const TensorList hs = linear(h, w_hh, b_hh).chunk(3, 1);    // r, z, n of the state (b_hn inside)
  const Tensor r = (xs[0] + hs[0]).sigmoid();
  const Tensor z = (xs[1] + hs[1]).sigmoid();
  const Tensor n = (xs[2] + hs[2] * r).tanh();
  return (h - n) * z + n;  // = (1 - z) n + z h
}

std::int64_t gates_of(RNNBase::Mode mode) {
  switch (mode) {
    case RNNBase::Mode::Lstm: return 4;
    case RNNBase::Mode::Gru: return 3;
    default: return 1;
  }
}

const char* name_of(RNNBase::Mode mode) {
  switch (mode) {
    case RNNBase::Mode::Lstm: return "LSTM";
    case RNNBase::Mode::Gru: return "GRU";
    default: return "RNN";
  }
}

RNNBase::Mode simple_mode(const std::string& nonlinearity) {
  KILN_CHECK_VALUE(nonlinearity == "tanh" || nonlinearity == "relu", "Unknown nonlinearity '", nonlinearity, "'");
  return nonlinearity == "tanh" ? RNNBase::Mode::RnnTanh : RNNBase::Mode::RnnRelu;
}

std::string shape_tuple(std::int64_t a, std::int64_t b, std::int64_t c) {
  return detail::str_cat("(", a, ", ", b, ", ", c, ")");
}

}  // namespace

// --- RNN, LSTM, GRU -----------------------------------------------------------------------------

RNNBase::RNNBase(std::string type_name, Mode mode, std::int64_t input_size, std::int64_t hidden_size,
                 const RNNBaseOptions& options)
    : Module(std::move(type_name)), input_size(input_size), hidden_size(hidden_size), options(options), mode(mode) {
  KILN_CHECK_VALUE(options.dropout >= 0 && options.dropout <= 1,
                   "dropout should be a number in range [0, 1] representing the probability of an element being "
                   "zeroed");
  KILN_CHECK_VALUE(hidden_size > 0, "hidden_size must be greater than zero");
  KILN_CHECK_VALUE(options.num_layers > 0, "num_layers must be greater than zero");
  if (options.dropout > 0 && options.num_layers == 1) {
    warn(detail::str_cat("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                         "expects num_layers greater than 1, but got dropout=",
                         options.dropout, " and num_layers=", options.num_layers));
  }
  const std::int64_t gate_size = multiply_sizes(gates_of(mode), hidden_size, "the gates' rows, gates * hidden_size");
  for (std::int64_t layer = 0; layer < options.num_layers; ++layer) {
    for (std::int64_t direction = 0; direction < directions(); ++direction) {
      const std::int64_t layer_input =
          layer == 0 ? input_size : multiply_sizes(hidden_size, directions(), "a layer's input, hidden_size * directions");
      const std::string suffix = std::to_string(layer) + (direction == 1 ? "_reverse" : "");
      auto add = [&](const std::string& name, Shape sizes) {
        names_.push_back(name + suffix);
        return &register_parameter(names_.back(), empty(sizes));
      };
      LayerWeights& weights = layer_weights_.emplace_back();
      weights.weight_ih = add("weight_ih_l", {gate_size, layer_input});
      weights.weight_hh = add("weight_hh_l", {gate_size, hidden_size});
      if (options.bias) {
        weights.bias_ih = add("bias_ih_l", {gate_size});
        weights.bias_hh = add("bias_hh_l", {gate_size});
      }
    }
  }
  reset_parameters();
}

void RNNBase::reset_parameters() {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (const LayerWeights& weights : layer_weights_) {
    for (Tensor* w : {weights.weight_ih, weights.weight_hh, weights.bias_ih, weights.bias_hh}) {
      if (w != nullptr) init::uniform_(*w, -bound, bound);
    }
  }
}

std::string RNNBase::extra_repr() const {
  std::string s = detail::str_cat(input_size, ", ", hidden_size);
  if (options.num_layers != 1) s += detail::str_cat(", num_layers=", options.num_layers);
  if (!options.bias) s += ", bias=False";
  if (options.batch_first) s += ", batch_first=True";
  if (options.dropout != 0) s += detail::str_cat(", dropout=", options.dropout);
  if (options.bidirectional) s += ", bidirectional=True";
  return s;
}

std::pair<Tensor, bool> RNNBase::sequence_first(const Tensor& input) const {
  KILN_CHECK(input.dim() == 2 || input.dim() == 3, name_of(mode), ": Expected input to be 2D or 3D, got ",
             input.dim(), "D input instead");
  KILN_CHECK(input.sizes().back() == input_size, "input.size(-1) must be equal to input_size. Expected ",
             input_size, ", got ", input.sizes().back());
  KILN_CHECK(input.is_floating_point(), name_of(mode), ": expected a floating-point input, got ",
             scalar_type_name(input.dtype()));
  if (input.dim() == 2) return {input.unsqueeze(1), true};
  return {options.batch_first ? input.transpose(0, 1) : input, false};
}

Tensor RNNBase::initial_state(const Tensor& given, const Tensor& input, bool unbatched, const char* what) const {
  const std::int64_t layers = options.num_layers * directions(), batch = input.sizes()[1];
  if (!given.defined()) return zeros({layers, batch, hidden_size}, input.options());
  Tensor h = given;
  if (unbatched) {
    KILN_CHECK(h.dim() == 2, "For unbatched 2-D input, hx should also be 2-D but got ", h.dim(), "-D tensor");
    h = h.unsqueeze(1);
  } else {
    KILN_CHECK(h.dim() == 3, "For batched 3-D input, hx should also be 3-D but got ", h.dim(), "-D tensor");
  }
  KILN_CHECK(h.sizes() == IntArrayRef({layers, batch, hidden_size}), "Expected ", what, " size ",
             shape_tuple(layers, batch, hidden_size), ", got ", h.sizes());
  KILN_CHECK(h.device() == input.device() && h.dtype() == input.dtype(), "Input and hidden tensors are not at the ",
             "same device and dtype, found input tensor at ", input.device(), " (", scalar_type_name(input.dtype()),
             ") and hidden tensor at ", h.device(), " (", scalar_type_name(h.dtype()), ")");
  return h;
}

std::pair<Tensor, TensorList> RNNBase::run(const Tensor& input, const TensorList& initial) {
  const std::int64_t steps = input.sizes()[0];
  Tensor x = input;
  TensorList h_n, c_n;
  for (std::int64_t layer = 0; layer < options.num_layers; ++layer) {
    TensorList outputs;
    for (std::int64_t direction = 0; direction < directions(); ++direction) {
      const std::int64_t index = layer * directions() + direction;
      const LayerWeights& weights = weights_of(layer, direction);
      const Tensor& w_ih = *weights.weight_ih;
      const Tensor& w_hh = *weights.weight_hh;
      const Tensor b_ih = options.bias ? *weights.bias_ih : Tensor();
      const Tensor b_hh = options.bias ? *weights.bias_hh : Tensor();
      Tensor h = initial[0].select(0, index);
      if (mode == Mode::Lstm) {
        // One matrix product for the whole sequence's input projections, both biases added
        // there; the recurrence is one op (Note [The fused LSTM layer]).
        const Tensor projected = linear(x, w_ih, options.bias ? b_ih + b_hh : Tensor());
        const TensorList out = lstm_layer(projected, h, initial[1].select(0, index), w_hh, direction == 1);
        outputs.push_back(out[0]);
        h_n.push_back(out[1]);
        c_n.push_back(out[2]);
        continue;
      }
      // One matrix product for the whole sequence's input projections.
      // Its steps as one unbind, whose backward stacks the steps' gradients once (Note [One node
      // for the pieces]), not a select per step, each of whose backwards is a zeroed [T, B, G].
      const TensorList projected = linear(x, w_ih, b_ih).unbind(0);
      TensorList out(static_cast<std::size_t>(steps));
      for (std::int64_t s = 0; s < steps; ++s) {
        const std::int64_t t = direction == 0 ? s : steps - 1 - s;
        const Tensor& xt = projected[static_cast<std::size_t>(t)];
        h = mode == Mode::Gru ? gru_step(xt, h, w_hh, b_hh) : simple_step(xt, h, w_hh, b_hh, mode == Mode::RnnRelu);
        out[static_cast<std::size_t>(t)] = h;
      }
      outputs.push_back(steps > 0 ? stack(out, 0) : empty({0, input.sizes()[1], hidden_size}, input.options()));
      h_n.push_back(h);
    }
    x = outputs.size() == 2 ? cat(outputs, 2) : outputs[0];
    if (options.dropout > 0 && is_training() && layer + 1 < options.num_layers) x = dropout(x, options.dropout, true);
  }
  TensorList finals{stack(h_n, 0)};
  if (mode == Mode::Lstm) finals.push_back(stack(c_n, 0));
  return {x, finals};
}

namespace {

/// The output back in the caller's layout.
Tensor caller_layout(const Tensor& output, bool unbatched, bool batch_first) {
  if (unbatched) return output.squeeze(1);
  return batch_first ? output.transpose(0, 1) : output;
}

}  // namespace

std::tuple<Tensor, Tensor> RNNBase::forward_hidden_only(const char* layer, const Tensor& input, const Tensor& hx) {
  capture::Scope scope(this, layer, {&input, &hx});  // Note [Layer scopes]
  const auto [x, unbatched] = sequence_first(input);
  const auto [output, finals] = run(x, {initial_state(hx, x, unbatched, "hidden")});
  const Tensor y = caller_layout(output, unbatched, options.batch_first),
               h_n = unbatched ? finals[0].squeeze(1) : finals[0];
  scope.returns({&y, &h_n});
  return {y, h_n};
}

RNN::RNN(std::int64_t input_size, std::int64_t hidden_size, const RNNBaseOptions& options)
    : RNNBase("RNN", simple_mode(options.nonlinearity), input_size, hidden_size, options) {}

RNN::RNN(const RNNOptions& options) : RNN(options.input_size(), options.hidden_size(), options.args()) {}

std::tuple<Tensor, Tensor> RNN::forward(const Tensor& input, const Tensor& hx) {
  return forward_hidden_only("RNN", input, hx);
}

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, const RNNBaseOptions& options)
    : RNNBase("LSTM", Mode::Lstm, input_size, hidden_size, options) {}

LSTM::LSTM(const LSTMOptions& options) : LSTM(options.input_size(), options.hidden_size(), options.args()) {}

LSTM::Output LSTM::forward(const Tensor& input, const std::optional<State>& hx) {
  Tensor h0, c0;
  if (hx) std::tie(h0, c0) = *hx;
  // The whole call, for a capture that reads the layer as one (Note [Layer scopes]).
  capture::Scope scope(this, "LSTM", {&input, &h0, &c0});
  const auto [x, unbatched] = sequence_first(input);
  if (hx) {
    std::tie(h0, c0) = *hx;
    const std::int64_t want = unbatched ? 2 : 3;
    KILN_CHECK(h0.dim() == want && c0.dim() == want, "For ", unbatched ? "unbatched 2-D" : "batched 3-D",
               " input, hx and cx should also be ", want, "-D but got (", h0.dim(), "-D, ", c0.dim(), "-D) tensors");
  }
  const auto [output, finals] =
      run(x, {initial_state(h0, x, unbatched, "hidden[0]"), initial_state(c0, x, unbatched, "hidden[1]")});
  auto state = [&](const Tensor& t) { return unbatched ? t.squeeze(1) : t; };
  const Tensor y = caller_layout(output, unbatched, options.batch_first), h_n = state(finals[0]),
               c_n = state(finals[1]);
  scope.returns({&y, &h_n, &c_n});
  return {y, {h_n, c_n}};
}

GRU::GRU(std::int64_t input_size, std::int64_t hidden_size, const RNNBaseOptions& options)
    : RNNBase("GRU", Mode::Gru, input_size, hidden_size, options) {}

GRU::GRU(const GRUOptions& options) : GRU(options.input_size(), options.hidden_size(), options.args()) {}

std::tuple<Tensor, Tensor> GRU::forward(const Tensor& input, const Tensor& hx) {
  return forward_hidden_only("GRU", input, hx);
}

// Hooks see the tensors of a call flattened, in forward's order (Note [Module calls]).
namespace {
using HiddenAndCell = std::tuple<Tensor, Tensor>;

/// An LSTM's or LSTM cell's (input, (h, c)) as hooks see it: (input, h, c), undefined where no
/// state was given.
TensorList hooked_lstm_args(const Tensor& input, const std::optional<HiddenAndCell>& hx) {
  return hx ? TensorList{input, std::get<0>(*hx), std::get<1>(*hx)} : TensorList{input, {}, {}};
}

/// The (h, c) back from the hooks' list: none when neither was given.
std::optional<HiddenAndCell> hooked_lstm_state(const TensorList& args) {
  if (!args[1].defined() && !args[2].defined()) return std::nullopt;
  return HiddenAndCell{args[1], args[2]};
}
}  // namespace

LSTM::Output LSTM::call_hooked(const Tensor& input, const std::optional<State>& hx) {
  const TensorList out = call_with_hooks(hooked_lstm_args(input, hx), [this](const TensorList& args) {
    const auto [output, final_state] = forward(args[0], hooked_lstm_state(args));
    return TensorList{output, std::get<0>(final_state), std::get<1>(final_state)};
  });
  return {out[0], {out[1], out[2]}};
}

// --- cells ----------------------------------------------------------------------------------------

LSTMCell::State LSTMCell::call_hooked(const Tensor& input, const std::optional<State>& hx) {
  const TensorList out = call_with_hooks(hooked_lstm_args(input, hx), [this](const TensorList& args) {
    const auto [h, c] = forward(args[0], hooked_lstm_state(args));
    return TensorList{h, c};
  });
  return {out[0], out[1]};
}

RNNCellBase::RNNCellBase(std::string type_name, std::int64_t input_size, std::int64_t hidden_size, bool bias,
                         std::int64_t gates)
    : Module(std::move(type_name)),
      input_size(input_size),
      hidden_size(hidden_size),
      weight_ih(register_parameter(
          "weight_ih", empty({multiply_sizes(gates, hidden_size, "the gates' rows, gates * hidden_size"), input_size}))),
      weight_hh(register_parameter("weight_hh", empty({gates * hidden_size, hidden_size}))),
      bias_ih(register_parameter("bias_ih", bias ? empty({gates * hidden_size}) : Tensor())),
      bias_hh(register_parameter("bias_hh", bias ? empty({gates * hidden_size}) : Tensor())) {
  reset_parameters();
}

void RNNCellBase::reset_parameters() {
  const double bound = hidden_size > 0 ? 1.0 / std::sqrt(static_cast<double>(hidden_size)) : 0.0;
  for (Tensor* w : {&weight_ih, &weight_hh, &bias_ih, &bias_hh}) {
    if (w->defined()) init::uniform_(*w, -bound, bound);
  }
}

std::string RNNCellBase::extra_repr() const {
  return detail::str_cat(input_size, ", ", hidden_size, bias_ih.defined() ? "" : ", bias=False");
}

std::pair<Tensor, bool> RNNCellBase::batched(const Tensor& input) const {
  KILN_CHECK(input.dim() == 1 || input.dim() == 2, type_name(), ": Expected input to be 1-D or 2-D but received ",
             input.dim(), "-D tensor");
  KILN_CHECK(input.sizes().back() == input_size, "input has inconsistent input_size: got ", input.sizes().back(),
             " expected ", input_size);
  return {input.dim() == 1 ? input.unsqueeze(0) : input, input.dim() == 1};
}

Tensor RNNCellBase::state(const Tensor& given, const Tensor& input, bool unbatched, const char* what) const {
  const std::int64_t batch = input.sizes()[0];
  if (!given.defined()) return zeros({batch, hidden_size}, input.options());
  KILN_CHECK(given.dim() == (unbatched ? 1 : 2), type_name(), ": Expected ", what, " to be ", unbatched ? 1 : 2,
             "-D for a ", unbatched ? 1 : 2, "-D input but received ", given.dim(), "-D tensor");
  const Tensor h = unbatched ? given.unsqueeze(0) : given;
  KILN_CHECK(h.sizes()[0] == batch, "Input batch size ", batch, " doesn't match ", what, " batch size ", h.sizes()[0]);
  KILN_CHECK(h.sizes()[1] == hidden_size, what, " has inconsistent hidden_size: got ", h.sizes()[1], ", expected ",
             hidden_size);
  return h;
}

RNNCell::RNNCell(std::int64_t input_size, std::int64_t hidden_size, bool bias, std::string nonlinearity)
    : RNNCellBase("RNNCell", input_size, hidden_size, bias, 1), nonlinearity(std::move(nonlinearity)) {
  simple_mode(this->nonlinearity);
}

Tensor RNNCell::forward(const Tensor& input, const Tensor& hx) {
  const auto [x, unbatched] = batched(input);
  const Tensor h = simple_step(linear(x, weight_ih, bias_ih), state(hx, x, unbatched, "hidden"), weight_hh, bias_hh,
                               nonlinearity == "relu");
  return unbatched ? h.squeeze(0) : h;
}

std::string RNNCell::extra_repr() const {
  return RNNCellBase::extra_repr() + (nonlinearity != "tanh" ? ", nonlinearity=" + nonlinearity : "");
}

LSTMCell::LSTMCell(std::int64_t input_size, std::int64_t hidden_size, bool bias)
    : RNNCellBase("LSTMCell", input_size, hidden_size, bias, 4) {}

LSTMCell::State LSTMCell::forward(const Tensor& input, const std::optional<State>& hx) {
  const auto [x, unbatched] = batched(input);
  Tensor h0, c0;
  if (hx) std::tie(h0, c0) = *hx;
  const auto [h, c] = lstm_cell_from_gates(linear(x, weight_ih, bias_ih) + linear(state(h0, x, unbatched, "hx"),
                                                                                 weight_hh, bias_hh),
                                           state(c0, x, unbatched, "cx"));
  if (unbatched) return {h.squeeze(0), c.squeeze(0)};
  return {h, c};
}

GRUCell::GRUCell(std::int64_t input_size, std::int64_t hidden_size, bool bias)
    : RNNCellBase("GRUCell", input_size, hidden_size, bias, 3) {}

Tensor GRUCell::forward(const Tensor& input, const Tensor& hx) {
  const auto [x, unbatched] = batched(input);
  const Tensor h = gru_step(linear(x, weight_ih, bias_ih), state(hx, x, unbatched, "hidden"), weight_hh, bias_hh);
  return unbatched ? h.squeeze(0) : h;
}

}  // namespace kiln::nn
