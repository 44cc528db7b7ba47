// nn/rnn.h — recurrent layers with PyTorch's semantics: RNN (tanh or relu), LSTM and GRU over
// whole sequences (num_layers, batch_first, bidirectional, dropout between layers, optional
// initial state), and the single-step RNNCell, LSTMCell and GRUCell. Parameter names, shapes,
// gate order and initialisation are PyTorch's, so a PyTorch state dict loads as it is.
//
//   kiln::nn::LSTM lstm(128, 256, {.num_layers = 2, .batch_first = true});
//   auto [output, state] = lstm(x);                   // x [B, T, 128] -> output [B, T, 256]
//   auto [h_n, c_n] = state;                           // each [2, B, 256]
//   auto [output2, state2] = lstm(x, {h_n, c_n});      // from a given state
//
// Calling a layer is calling its forward, as in PyTorch; a layer with several outputs returns
// a tuple, so `Tensor y = lstm(x);` does not compile.
// Read next: nn/rnn_options.h, nn/rnn.cpp (one step of each cell, and the loops).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "nn/module.h"
#include "nn/rnn_options.h"

namespace kiln::nn {

// Note [Recurrent layers]
// ~~~~~~~~~~~~~~~~~~~~~~~
// With x_t the layer's input at time t and h the previous hidden state (c the cell state):
//   RNN   h' = tanh(W_ih x_t + b_ih + W_hh h + b_hh)        (or relu)
//   LSTM  i, f, g, o = chunks of W_ih x_t + b_ih + W_hh h + b_hh, in that order
//         c' = σ(f) c + σ(i) tanh(g),  h' = σ(o) tanh(c')
//   GRU   r, z, n are chunks of W_ih x_t + b_ih and of W_hh h + b_hh (each 3 H wide)
//         r = σ(x_r + h_r),  z = σ(x_z + h_z),  n = tanh(x_n + r (W_hn h + b_hn)),
//         h' = (1 - z) n + z h                 (b_hn inside the reset product, as cuDNN does)
// The input projections W_ih x_t + b_ih of a whole sequence are one matrix product before the
// time loop; only W_hh h runs per step. Layer l > 0 reads the previous layer's output (both
// directions concatenated), with dropout between layers in training. The reverse direction
// runs the same recurrence from the last step to the first. The LSTM's recurrence is one op
// (lstm_layer, Note [The fused LSTM layer]) whose backward goes through time on its own buffers;
// RNN and GRU steps are differentiable ops, so their backward through time is autograd's.

/// What RNN, LSTM and GRU share: the parameters of every layer and direction, and the loop.
class RNNBase : public Module {
 public:
  enum class Mode { RnnTanh, RnnRelu, Lstm, Gru };

  RNNBase(std::string type_name, Mode mode, std::int64_t input_size, std::int64_t hidden_size,
          const RNNBaseOptions& options);
  /// Every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch.
  void reset_parameters();
  std::string extra_repr() const override;

  const std::int64_t input_size, hidden_size;
  const RNNBaseOptions options;
  const Mode mode;
  /// "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse", ...
  const std::vector<std::string>& flat_weights_names() const { return names_; }

 protected:
  /// Runs every layer and direction over `input` from the initial states (h0, and c0 for the
  /// LSTM, already checked and batched); returns the output and the final states.
  std::pair<Tensor, TensorList> run(const Tensor& input, const TensorList& initial);
  /// The input as [seq, batch, feature] and whether it came without a batch dimension; checks
  /// its rank and feature size.
  std::pair<Tensor, bool> sequence_first(const Tensor& input) const;
  /// `given` (or zeros) as [layers * directions, batch, hidden], checked against `input`.
  Tensor initial_state(const Tensor& given, const Tensor& input, bool unbatched, const char* what) const;
  std::int64_t directions() const { return options.bidirectional ? 2 : 1; }
  /// RNN's and GRU's forward, whose state is h alone: (input, h_0) -> (output, h_n), recorded
  /// as one `layer` scope for a capture.
  std::tuple<Tensor, Tensor> forward_hidden_only(const char* layer, const Tensor& input, const Tensor& hx);
  /// RNN's and GRU's call, (input, h_0) -> (output, h_n): `forward_fn` between the hooks when
  /// there are any (Note [Module calls]).
  template <class Forward>
  std::tuple<Tensor, Tensor> call_output_and_state(const Tensor& input, const Tensor& hx, const Forward& forward_fn) {
    if (!has_hooks()) [[likely]] return forward_fn(input, hx);
    const TensorList out = call_with_hooks({input, hx}, [&forward_fn](const TensorList& args) {
      const auto [output, h_n] = forward_fn(args[0], args[1]);
      return TensorList{output, h_n};
    });
    return {out[0], out[1]};
  }

 private:
  /// One layer's parameters in one direction, as registered ("weight_ih_l0", "weight_hh_l0",
  /// "bias_ih_l0", "bias_hh_l0"); the biases are null without options.bias.
  struct LayerWeights {
    Tensor* weight_ih = nullptr;
    Tensor* weight_hh = nullptr;
    Tensor* bias_ih = nullptr;
    Tensor* bias_hh = nullptr;
  };
  /// The weights of `layer` in `direction` (1 is the reverse direction).
  const LayerWeights& weights_of(std::int64_t layer, std::int64_t direction) const {
    return layer_weights_[static_cast<std::size_t>(layer * directions() + direction)];
  }

  std::vector<std::string> names_;
  std::vector<LayerWeights> layer_weights_;  // layer by layer, forward direction first
};

/// Elman RNN: output [seq, batch, D*hidden] and h_n [layers*D, batch, hidden].
class RNN : public RNNBase {
 public:
  RNN(std::int64_t input_size, std::int64_t hidden_size, const RNNBaseOptions& options = {});
  explicit RNN(const RNNOptions& options);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
  /// forward, under PyTorch's call syntax: auto [output, h_n] = rnn(x);
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& hx = {}) {
    return call_output_and_state(input, hx, [this](const Tensor& x, const Tensor& h) { return forward(x, h); });
  }
};

/// LSTM: output, and (h_n, c_n).
class LSTM : public RNNBase {
 public:
  using State = std::tuple<Tensor, Tensor>;  // (h, c)
  using Output = std::tuple<Tensor, State>;  // (output, (h_n, c_n))

  LSTM(std::int64_t input_size, std::int64_t hidden_size, const RNNBaseOptions& options = {});
  explicit LSTM(const LSTMOptions& options);
  Output forward(const Tensor& input, const std::optional<State>& hx = std::nullopt);
  /// lstm.forward(x, {h0, c0}): a braced pair cannot initialise a std::optional, so it lands here.
  Output forward(const Tensor& input, const State& hx) { return forward(input, std::optional<State>(hx)); }
  /// forward, under PyTorch's call syntax: auto [output, state] = lstm(x, {h0, c0});
  Output operator()(const Tensor& input, const std::optional<State>& hx = std::nullopt) {
    if (!has_hooks()) [[likely]] return forward(input, hx);
    return call_hooked(input, hx);
  }
  Output operator()(const Tensor& input, const State& hx) { return (*this)(input, std::optional<State>(hx)); }

 private:
  /// Hooks see (input, h_0, c_0) and (output, h_n, c_n). Note [Module calls].
  Output call_hooked(const Tensor& input, const std::optional<State>& hx);
};

/// GRU: output and h_n.
class GRU : public RNNBase {
 public:
  GRU(std::int64_t input_size, std::int64_t hidden_size, const RNNBaseOptions& options = {});
  explicit GRU(const GRUOptions& options);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, const Tensor& hx = {});
  /// forward, under PyTorch's call syntax: auto [output, h_n] = gru(x);
  std::tuple<Tensor, Tensor> operator()(const Tensor& input, const Tensor& hx = {}) {
    return call_output_and_state(input, hx, [this](const Tensor& x, const Tensor& h) { return forward(x, h); });
  }
};

/// What the three cells share: weight_ih [G*hidden, input], weight_hh [G*hidden, hidden],
/// bias_ih and bias_hh [G*hidden] (G = 1, 4, 3).
class RNNCellBase : public Module {
 public:
  RNNCellBase(std::string type_name, std::int64_t input_size, std::int64_t hidden_size, bool bias,
              std::int64_t gates);
  void reset_parameters();
  std::string extra_repr() const override;

  const std::int64_t input_size, hidden_size;
  Tensor& weight_ih;
  Tensor& weight_hh;
  Tensor& bias_ih;  // undefined without bias
  Tensor& bias_hh;

 protected:
  /// The input as [batch, input] (and whether it was 1-D), checked.
  std::pair<Tensor, bool> batched(const Tensor& input) const;
  /// `given` (or zeros) as [batch, hidden], checked.
  Tensor state(const Tensor& given, const Tensor& input, bool unbatched, const char* what) const;
};

class RNNCell : public RNNCellBase {
 public:
  RNNCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true, std::string nonlinearity = "tanh");
  /// h' [batch, hidden] (or [hidden] for a 1-D input).
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  using Module::operator();
  Tensor operator()(const Tensor& input, const Tensor& hx) {
    return call_two_tensors(input, hx, [this](const Tensor& x, const Tensor& h) { return forward(x, h); });
  }
  std::string extra_repr() const override;
  const std::string nonlinearity;
};

class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true);
  using State = std::tuple<Tensor, Tensor>;  // (h, c)
  /// (h', c').
  State forward(const Tensor& input, const std::optional<State>& hx = std::nullopt);
  State forward(const Tensor& input, const State& hx) { return forward(input, std::optional<State>(hx)); }
  /// forward, under PyTorch's call syntax: auto [h, c] = cell(x, {h, c});
  State operator()(const Tensor& input, const std::optional<State>& hx = std::nullopt) {
    if (!has_hooks()) [[likely]] return forward(input, hx);
    return call_hooked(input, hx);
  }
  State operator()(const Tensor& input, const State& hx) { return (*this)(input, std::optional<State>(hx)); }

 private:
  /// Hooks see (input, h_0, c_0) and (h_1, c_1). Note [Module calls].
  State call_hooked(const Tensor& input, const std::optional<State>& hx);
};

class GRUCell : public RNNCellBase {
 public:
  GRUCell(std::int64_t input_size, std::int64_t hidden_size, bool bias = true);
  Tensor forward(const Tensor& input, const Tensor& hx);
  Tensor forward(const Tensor& input) override { return forward(input, Tensor()); }
  using Module::operator();
  Tensor operator()(const Tensor& input, const Tensor& hx) {
    return call_two_tensors(input, hx, [this](const Tensor& x, const Tensor& h) { return forward(x, h); });
  }
};

}  // namespace kiln::nn
