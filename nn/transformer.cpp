// nn/transformer.cpp — the encoder layer's two residual blocks, in post-norm or pre-norm order
// (torch.nn.TransformerEncoderLayer's _sa_block and _ff_block), and the stack of layers.
#include "nn/transformer.h"

#include <limits>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/triangular.h"
#include "core/creation.h"
#include "core/random.h"

namespace kiln::nn {

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerEncoderLayerArgs& o)
    : Module("TransformerEncoderLayer"), options(o) {
  KILN_CHECK_VALUE(o.activation == "relu" || o.activation == "gelu", "activation should be relu/gelu, not ",
                   o.activation);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(
                                               o.d_model, o.nhead,
                                               MultiheadAttentionArgs{.dropout = o.dropout, .batch_first = o.batch_first}));
  linear1 = register_module("linear1", std::make_shared<Linear>(o.d_model, o.dim_feedforward));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, o.d_model));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{o.d_model}, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

namespace {
TransformerEncoderLayerArgs with_sizes(TransformerEncoderLayerArgs options, std::int64_t d_model,
                                          std::int64_t nhead) {
  options.d_model = d_model;
  options.nhead = nhead;
  return options;
}
}  // namespace

TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead,
                                                 TransformerEncoderLayerArgs options)
    : TransformerEncoderLayer(with_sizes(std::move(options), d_model, nhead)) {}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& padding) {
  return (*dropout1)(std::get<0>((*self_attn)(x, x, x, padding, /*need_weights=*/false, mask)));
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  const Tensor hidden = (*linear1)(x);
  return (*dropout2)((*linear2)((*dropout)(options.activation == "gelu" ? gelu(hidden) : hidden.relu())));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& padding) {
  Tensor x = src;
  if (options.norm_first) {
    x = x + self_attention_block((*norm1)(x), src_mask, padding);
    return x + feed_forward_block((*norm2)(x));
  }
  x = (*norm1)(x + self_attention_block(x, src_mask, padding));
  return (*norm2)(x + feed_forward_block(x));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayerArgs& layer, std::int64_t num_layers,
                                       bool final_norm)
    : Module("TransformerEncoder"), num_layers(num_layers) {
  KILN_CHECK_VALUE(num_layers > 0, "TransformerEncoder: num_layers must be positive, got ", num_layers);
  layers = register_module("layers", std::make_shared<ModuleList>());
  for (std::int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerEncoderLayer>(layer));
  if (final_norm) norm = register_module("norm", std::make_shared<LayerNorm>(Shape{layer.d_model}, layer.layer_norm_eps));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers, bool final_norm)
    : TransformerEncoder(layer, num_layers, final_norm, get_rng_state()) {}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers, bool final_norm,
                                       const Tensor& rng_state)
    : TransformerEncoder(layer.options, num_layers, final_norm) {
  // The layers' fresh initialisation is overwritten below; undoing its draws leaves the random
  // stream where PyTorch's deepcopy leaves it.
  set_rng_state(rng_state);
  const Tensor like = layer.parameters().front();
  to(like.device(), like.dtype());
  const StateDict weights = layer.state_dict();
  for (std::size_t i = 0; i < layers->size(); ++i) (*layers)[i]->load_state_dict(weights);
  train(layer.is_training());
}

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& padding) {
  Tensor x = src;
  for (std::size_t i = 0; i < layers->size(); ++i) {
    x = (*std::static_pointer_cast<TransformerEncoderLayer>((*layers)[i]))(x, mask, padding);
  }
  return norm ? (*norm)(x) : x;
}

Tensor generate_square_subsequent_mask(std::int64_t size, TensorOptions options) {
  const Tensor upper = triu(ones({size, size}, options.dtype(kBool)), 1);
  return masked_fill(zeros({size, size}, options), upper, -std::numeric_limits<double>::infinity());
}

}  // namespace kiln::nn
