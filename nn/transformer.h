// nn/transformer.h — TransformerEncoderLayer and TransformerEncoder with PyTorch's semantics and
// names (self_attn, linear1, linear2, norm1, norm2; layers.<i>.…): self-attention and a
// feed-forward block, each with dropout and a residual connection, layer norm after each
// (post-norm, the default) or before (norm_first).
//
//   kiln::nn::TransformerEncoderLayer layer(256, 4, {.batch_first = true});
//   kiln::nn::TransformerEncoder encoder(layer, 2);  // two copies of layer, weights included
//   Tensor y = encoder(x, kiln::nn::generate_square_subsequent_mask(T));   // x [B, T, 256]
//
// Read next: nn/attention.h.
#pragma once

#include <string>

#include "nn/attention.h"
#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/normalization.h"

namespace kiln::nn {

/// The arguments, for designated initializers (in this declaration order). d_model and nhead
/// are here for TransformerEncoderLayer(args); TransformerEncoderLayer(d_model, nhead, {...})
/// overrides them.
struct TransformerEncoderLayerArgs {
  std::int64_t d_model = 512;
  std::int64_t nhead = 8;
  std::int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;
  bool norm_first = false;
};

/// LibTorch's fluent form, the sizes first and the setters in any order:
/// TransformerEncoderLayer(TransformerEncoderLayerOptions(256, 4).batch_first(true).dropout(0)).
class TransformerEncoderLayerOptions {
 public:
  TransformerEncoderLayerOptions(std::int64_t d_model, std::int64_t nhead) {
    args_.d_model = d_model;
    args_.nhead = nhead;
  }
  TransformerEncoderLayerOptions& dim_feedforward(std::int64_t value) { return set(args_.dim_feedforward, value); }
  TransformerEncoderLayerOptions& dropout(double value) { return set(args_.dropout, value); }
  /// "relu" or "gelu".
  TransformerEncoderLayerOptions& activation(std::string value) { return set(args_.activation, std::move(value)); }
  TransformerEncoderLayerOptions& layer_norm_eps(double value) { return set(args_.layer_norm_eps, value); }
  TransformerEncoderLayerOptions& batch_first(bool value) { return set(args_.batch_first, value); }
  TransformerEncoderLayerOptions& norm_first(bool value) { return set(args_.norm_first, value); }
  std::int64_t d_model() const { return args_.d_model; }
  std::int64_t nhead() const { return args_.nhead; }
  std::int64_t dim_feedforward() const { return args_.dim_feedforward; }
  double dropout() const { return args_.dropout; }
  const std::string& activation() const { return args_.activation; }
  double layer_norm_eps() const { return args_.layer_norm_eps; }
  bool batch_first() const { return args_.batch_first; }
  bool norm_first() const { return args_.norm_first; }
  const TransformerEncoderLayerArgs& args() const { return args_; }

 private:
  template <class T>
  TransformerEncoderLayerOptions& set(T& field, T value) {
    field = std::move(value);
    return *this;
  }
  TransformerEncoderLayerArgs args_;
};

class TransformerEncoderLayer : public Module {
 public:
  explicit TransformerEncoderLayer(const TransformerEncoderLayerArgs& options);
  explicit TransformerEncoderLayer(const TransformerEncoderLayerOptions& options)
      : TransformerEncoderLayer(options.args()) {}
  /// PyTorch's TransformerEncoderLayer(d_model, nhead, ...): the required arguments first, the
  /// rest as designated initializers ({.dim_feedforward = 64, .batch_first = true}); the
  /// options' own d_model and nhead are overridden.
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead, TransformerEncoderLayerArgs options = {});
  /// `src_mask` [L, S] or [N * nhead, L, S] (bool: true = not allowed; float: added);
  /// `src_key_padding_mask` [N, S] (true = padding).
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {});
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  /// forward, under PyTorch's call syntax: layer(x), layer(x, mask), layer(x, mask, padding).
  using Module::operator();
  Tensor operator()(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask = {}) {
    if (!has_hooks()) [[likely]] return forward(src, src_mask, src_key_padding_mask);
    return call_with_hooks({src, src_mask, src_key_padding_mask}, [this](const TensorList& args) {
      return TensorList{forward(args[0], args[1], args[2])};
    })[0];
  }

  const TransformerEncoderLayerArgs options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;
  std::shared_ptr<LayerNorm> norm1, norm2;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& padding);
  Tensor feed_forward_block(const Tensor& x);
};

/// `num_layers` layers of the same options (each with its own weights), then an optional
/// final LayerNorm.
class TransformerEncoder : public Module {
 public:
  TransformerEncoder(const TransformerEncoderLayerArgs& layer, std::int64_t num_layers, bool final_norm = false);
  /// PyTorch's TransformerEncoder(encoder_layer, num_layers): every layer starts as a copy of
  /// `layer` (options, weights, device, dtype, training mode), and later trains on its own.
  /// Making the copies draws no random numbers, as PyTorch's deepcopy draws none.
  TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers, bool final_norm = false);
  TransformerEncoder(const std::shared_ptr<TransformerEncoderLayer>& layer, std::int64_t num_layers,
                     bool final_norm = false)
      : TransformerEncoder(*layer, num_layers, final_norm) {}
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = {});
  Tensor forward(const Tensor& src) override { return forward(src, Tensor()); }
  /// forward, under PyTorch's call syntax: encoder(x), encoder(x, mask), encoder(x, mask, padding).
  using Module::operator();
  Tensor operator()(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask = {}) {
    if (!has_hooks()) [[likely]] return forward(src, mask, src_key_padding_mask);
    return call_with_hooks({src, mask, src_key_padding_mask}, [this](const TensorList& args) {
      return TensorList{forward(args[0], args[1], args[2])};
    })[0];
  }

  const std::int64_t num_layers;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<LayerNorm> norm;  // null without final_norm

 private:
  // Copies `layer` into fresh layers made after the random state was saved in `rng_state`.
  TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers, bool final_norm,
                     const Tensor& rng_state);
};

/// A causal mask for a sequence of `size`: -inf above the diagonal, 0 elsewhere
/// (nn.Transformer.generate_square_subsequent_mask).
Tensor generate_square_subsequent_mask(std::int64_t size, TensorOptions options = {});

}  // namespace kiln::nn
