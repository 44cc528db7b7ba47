// nn/attention.h — MultiheadAttention with PyTorch's semantics and parameter names
// (in_proj_weight [3E, E], in_proj_bias [3E], out_proj): query, key and value projected, split
// into heads, scaled dot-product attention per head, heads concatenated and projected back.
//
//   kiln::nn::MultiheadAttention attention(256, 4, {.batch_first = true});
//   auto [out, weights] = attention(x, x, x);           // x [B, T, 256]; weights [B, T, T]
//   auto [y, _] = attention(x, x, x, {.need_weights = false, .attn_mask = causal});
//
// Read next: autograd/functions/attention.h (the attention op), nn/transformer.h.
#pragma once

#include <tuple>

#include "nn/linear.h"
#include "nn/module.h"

namespace kiln::nn {

/// The keyword arguments, for designated initializers (in this declaration order):
/// MultiheadAttention(256, 4, {.dropout = 0.1, .batch_first = true}).
struct MultiheadAttentionArgs {
  double dropout = 0.0;      // on the attention weights, in training
  bool bias = true;          // in_proj_bias and out_proj.bias
  bool batch_first = false;  // [batch, seq, feature] instead of [seq, batch, feature]
};

/// LibTorch's fluent form, the sizes first and the setters in any order:
/// MultiheadAttention(MultiheadAttentionOptions(256, 4).batch_first(true).dropout(0.1)). A
/// class, not an aggregate: `MultiheadAttentionOptions(256, 4)` of an aggregate whose first
/// field is `dropout` would compile, as C++20's parenthesized aggregate initialization, to a
/// dropout of 256.
class MultiheadAttentionOptions {
 public:
  MultiheadAttentionOptions(std::int64_t embed_dim, std::int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads) {}
  MultiheadAttentionOptions& dropout(double value) { return set(args_.dropout, value); }
  MultiheadAttentionOptions& bias(bool value) { return set(args_.bias, value); }
  MultiheadAttentionOptions& batch_first(bool value) { return set(args_.batch_first, value); }
  std::int64_t embed_dim() const { return embed_dim_; }
  std::int64_t num_heads() const { return num_heads_; }
  double dropout() const { return args_.dropout; }
  bool bias() const { return args_.bias; }
  bool batch_first() const { return args_.batch_first; }
  const MultiheadAttentionArgs& args() const { return args_; }

 private:
  template <class T>
  MultiheadAttentionOptions& set(T& field, T value) {
    field = value;
    return *this;
  }
  std::int64_t embed_dim_, num_heads_;
  MultiheadAttentionArgs args_;
};

/// The optional arguments of a call, in PyTorch's positional order, to name as keywords:
///   attention(q, k, v, {.key_padding_mask = m, .need_weights = false, .attn_mask = a})
struct MultiheadAttentionForwardOptions {
  Tensor key_padding_mask{};
  bool need_weights = true;
  Tensor attn_mask{};
  bool average_attn_weights = true;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads, const MultiheadAttentionArgs& options = {});
  explicit MultiheadAttention(const MultiheadAttentionOptions& options)
      : MultiheadAttention(options.embed_dim(), options.num_heads(), options.args()) {}
  /// PyTorch's: xavier_uniform_ in_proj_weight, zero biases (out_proj.weight keeps Linear's).
  void reset_parameters();

  /// (attention output [L, N, E] (or batch first, or [L, E] unbatched), weights [N, L, S]
  /// averaged over heads, or [N, heads, L, S] when !average_attn_weights; undefined when
  /// !need_weights). `key_padding_mask` [N, S]: true (or -inf) ignores that key.
  /// `attn_mask` [L, S] or [N * heads, L, S]: true means *not allowed* (PyTorch's MHA
  /// convention, the opposite of scaled_dot_product_attention's), a float mask is added. A
  /// floating mask is Float32 or the query's dtype; key and value share the query's batch.
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = {}, bool need_weights = true,
                                     const Tensor& attn_mask = {}, bool average_attn_weights = true);
  // The two overloads taking these options are templates only so that `forward(q, k, v, {})`
  // (where `{}` converts equally well to a Tensor and to the options) picks the positional one,
  // as it did before they existed: C++ prefers a non-template when the conversions tie.
  template <class = void>
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const MultiheadAttentionForwardOptions& options) {
    return forward(query, key, value, options.key_padding_mask, options.need_weights, options.attn_mask,
                   options.average_attn_weights);
  }
  /// forward, under PyTorch's call syntax (positional or with the options above).
  std::tuple<Tensor, Tensor> operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const Tensor& key_padding_mask = {}, bool need_weights = true,
                                        const Tensor& attn_mask = {}, bool average_attn_weights = true) {
    if (!has_hooks()) [[likely]] {
      return forward(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights);
    }
    return call_hooked(query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights);
  }
  template <class = void>
  std::tuple<Tensor, Tensor> operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                        const MultiheadAttentionForwardOptions& options) {
    return (*this)(query, key, value, options.key_padding_mask, options.need_weights, options.attn_mask,
                   options.average_attn_weights);
  }
  std::string extra_repr() const override;

  const std::int64_t embed_dim, num_heads, head_dim;
  const MultiheadAttentionArgs options;
  Tensor& in_proj_weight;
  Tensor& in_proj_bias;  // undefined without bias
  std::shared_ptr<Linear> out_proj;

 private:
  /// Hooks see (query, key, value, key_padding_mask, attn_mask) and (output, weights).
  /// Note [Module calls].
  std::tuple<Tensor, Tensor> call_hooked(const Tensor& query, const Tensor& key, const Tensor& value,
                                         const Tensor& key_padding_mask, bool need_weights, const Tensor& attn_mask,
                                         bool average_attn_weights);
};

}  // namespace kiln::nn
