// nn/rnn_options.h — the options of the recurrent layers, in both spellings users bring:
// C++20 designated initializers (Python's keywords, but in the struct's declaration order)
//
//   kiln::nn::LSTM lstm(5, 4, {.num_layers = 2, .batch_first = true});
//
// and LibTorch's fluent setters, the required sizes first, then any setters in any order:
//
//   kiln::nn::LSTM lstm(kiln::nn::LSTMOptions(5, 4).batch_first(true).num_layers(2));
//   kiln::nn::RNN rnn(kiln::nn::RNNOptions(5, 4).nonlinearity("relu"));
//
// The aggregate is RNNBaseOptions (PyTorch's RNNBase arguments): RNNOptions is LibTorch's
// fluent class, and a member cannot be both a field and a function.
//
// Read next: nn/rnn.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace kiln::nn {

/// The arguments every recurrent layer shares (PyTorch's RNNBase), for designated initializers.
struct RNNBaseOptions {
  std::int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // input and output [batch, seq, feature] instead of [seq, batch, feature]
  double dropout = 0.0;      // on the outputs of every layer but the last, in training
  bool bidirectional = false;
  std::string nonlinearity = "tanh";  // RNN only: "tanh" or "relu"
};

/// LibTorch's fluent form: a setter takes the value and returns the options, so calls chain
/// in any order; the same name without an argument reads the value.
template <class Derived>
class FluentRNNOptions {
 public:
  FluentRNNOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}

  Derived& num_layers(std::int64_t value) { return set(args_.num_layers, value); }
  Derived& bias(bool value) { return set(args_.bias, value); }
  Derived& batch_first(bool value) { return set(args_.batch_first, value); }
  Derived& dropout(double value) { return set(args_.dropout, value); }
  Derived& bidirectional(bool value) { return set(args_.bidirectional, value); }

  std::int64_t input_size() const { return input_size_; }
  std::int64_t hidden_size() const { return hidden_size_; }
  std::int64_t num_layers() const { return args_.num_layers; }
  bool bias() const { return args_.bias; }
  bool batch_first() const { return args_.batch_first; }
  double dropout() const { return args_.dropout; }
  bool bidirectional() const { return args_.bidirectional; }
  /// The same options as the designated-initializer struct the layers store.
  const RNNBaseOptions& args() const { return args_; }

 protected:
  template <class T, class V>
  Derived& set(T& field, V value) {
    field = std::move(value);
    return static_cast<Derived&>(*this);
  }

 private:
  std::int64_t input_size_, hidden_size_;

 protected:
  RNNBaseOptions args_;
};

/// torch::nn::RNNOptions(input_size, hidden_size).num_layers(2).nonlinearity("relu")
class RNNOptions : public FluentRNNOptions<RNNOptions> {
 public:
  using FluentRNNOptions::FluentRNNOptions;
  /// "tanh" (the default) or "relu".
  RNNOptions& nonlinearity(std::string value) { return set(args_.nonlinearity, std::move(value)); }
  const std::string& nonlinearity() const { return args_.nonlinearity; }
};

/// torch::nn::LSTMOptions(input_size, hidden_size).num_layers(2).batch_first(true)
class LSTMOptions : public FluentRNNOptions<LSTMOptions> {
 public:
  using FluentRNNOptions::FluentRNNOptions;
};

/// torch::nn::GRUOptions(input_size, hidden_size).num_layers(2).bidirectional(true)
class GRUOptions : public FluentRNNOptions<GRUOptions> {
 public:
  using FluentRNNOptions::FluentRNNOptions;
};

}  // namespace kiln::nn
