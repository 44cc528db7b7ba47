// autograd/functions/attention.h — scaled dot-product attention, softmax(Q Kᵀ · scale + mask) V,
// as one differentiable op (PyTorch's F.scaled_dot_product_attention) whose backward keeps the
// attention matrix once. Batched over every dim before the last two.
//
//   Tensor out = kiln::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
//
// Read next: nn/attention.h (MultiheadAttention, built on it).
#pragma once

#include <optional>

#include "core/tensor.h"

namespace kiln {

/// query [..., L, E], key [..., S, E], value [..., S, Ev] -> [..., L, Ev]. `attn_mask`
/// (broadcastable to [..., L, S]) is boolean (true: take part) or floating, Float32 or the
/// query's dtype (added to the scores); `is_causal` masks every key after the query's position
/// and excludes attn_mask. `dropout_p` in [0, 1] drops attention weights (pass 0 outside
/// training); `scale` defaults to 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace kiln
