// autograd/functions/attention.cpp — scaled dot-product attention: forward and backward side by
// side, saving Q, K, V and the attention probabilities once (plus dropout's mask).
#include "autograd/functions/attention.h"

#include <cmath>
#include <limits>

#include "autograd/function.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/triangular.h"
#include "core/creation.h"
#include "core/ops/allocate.h"
#include "core/ops/random.h"
#include "core/ops/softmax.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct ScaledDotProductAttentionFn : Function<ScaledDotProductAttentionFn> {
  static constexpr const char* name = "ScaledDotProductAttentionBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::LowerPrecision;
  struct Saved {
    double scale = 1.0;
  };
  // `mask` is additive (or undefined); `keep` is dropout's kept-and-rescaled mask (or undefined).
  static Tensor forward(Context<ScaledDotProductAttentionFn>& ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& mask, const Tensor& keep, double scale) {
    Tensor scores = matmul(q, k.transpose(-2, -1)) * scale;
    if (mask.defined()) scores = scores + mask;
    const Tensor p = scores.softmax(-1);
    ctx.saved.scale = scale;
    ctx.save_for_backward({q, k, v, p, keep, mask});
    return matmul(keep.defined() ? p * keep : p, v);
  }
  // With S = Q Kᵀ scale + M, P = softmax(S) (rows), O = (P ∘ D) V and D dropout's mask:
  //   dV = (P ∘ D)ᵀ dO,   dP = (dO Vᵀ) ∘ D,   dS = P ∘ (dP - rowsum(dP ∘ P)),
  //   dQ = dS K · scale,  dK = dSᵀ Q · scale,  dM = dS (summed to M's shape by the engine).
  // When backward itself is recorded (create_graph), P is recomputed from Q and K so that the
  // gradient's own graph reaches them (the saved P is a constant to autograd).
  static TensorList backward(Context<ScaledDotProductAttentionFn>& ctx, const TensorList& grads) {
    const TensorList s = ctx.get_saved_variables();  // q, k, v, p, keep, mask
    const Tensor &q = s[0], &k = s[1], &v = s[2], &keep = s[4], &mask = s[5];
    Tensor p = s[3];
    if (is_grad_enabled()) {
      Tensor scores = matmul(q, k.transpose(-2, -1)) * ctx.saved.scale;
      if (mask.defined()) scores = scores + mask;
      p = scores.softmax(-1);
    }
    const Tensor& dout = grads[0];
    const double scale = ctx.saved.scale;
    Tensor dv, dq, dk, dmask;
    if (ctx.needs_input_grad(2)) dv = matmul((keep.defined() ? p * keep : p).transpose(-2, -1), dout);
    if (ctx.needs_input_grad(0) || ctx.needs_input_grad(1) || ctx.needs_input_grad(3)) {
      Tensor dp = matmul(dout, v.transpose(-2, -1));
      if (keep.defined()) dp = dp * keep;
      const Tensor ds = !is_grad_enabled() && ops::can_fuse_softmax(p) && dp.dtype() == p.dtype()
                            ? ops::softmax_backward(dp, p, -1, /*log=*/false)
                            : p * (dp - (dp * p).sum({-1}, true));
      if (ctx.needs_input_grad(0)) dq = matmul(ds, k) * scale;
      if (ctx.needs_input_grad(1)) dk = matmul(ds.transpose(-2, -1), q) * scale;
      if (ctx.needs_input_grad(3)) dmask = ds;
    }
    return {dq, dk, dv, dmask, Tensor()};
  }
};

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  KILN_CHECK(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2,
             "scaled_dot_product_attention: query, key and value must have at least 2 dimensions, got ", query.dim(),
             ", ", key.dim(), " and ", value.dim());
  KILN_CHECK_TYPE(query.dtype() == key.dtype() && query.dtype() == value.dtype(),
                  "Expected query, key, and value to have the same dtype, but got query.dtype: ",
                  scalar_type_name(query.dtype()), " key.dtype: ", scalar_type_name(key.dtype()),
                  " and value.dtype: ", scalar_type_name(value.dtype()), " instead.");
  KILN_CHECK(query.sizes().back() == key.sizes().back(), "scaled_dot_product_attention: query and key must have ",
             "the same embedding size, got ", query.sizes().back(), " and ", key.sizes().back());
  KILN_CHECK(key.sizes()[key.dim() - 2] == value.sizes()[value.dim() - 2],
             "scaled_dot_product_attention: key and value must have the same sequence length, got ",
             key.sizes()[key.dim() - 2], " and ", value.sizes()[value.dim() - 2]);
  KILN_CHECK_VALUE(dropout_p >= 0.0 && dropout_p <= 1.0, "dropout probability has to be between 0 and 1, but got ",
                   dropout_p);
  KILN_CHECK(!(is_causal && attn_mask.defined()),
             "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
  const std::int64_t L = query.sizes()[query.dim() - 2], S = key.sizes()[key.dim() - 2];
  const double factor = scale.value_or(1.0 / std::sqrt(static_cast<double>(query.sizes().back())));
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  // Masks become additive: 0 where attention may look, -inf where it may not.
  const TensorOptions like_query = TensorOptions().dtype(query.dtype()).device(query.device());
  Tensor additive;
  if (is_causal) {
    const Tensor allowed = tril(ones({L, S}, TensorOptions().dtype(kBool).device(query.device())));
    additive = masked_fill(zeros({L, S}, like_query), allowed.logical_not(), minus_infinity);
  } else if (attn_mask.defined()) {
    if (attn_mask.dtype() == kBool) {
      additive = masked_fill(zeros(attn_mask.sizes(), like_query), attn_mask.logical_not(), minus_infinity);
    } else {
      // PyTorch's check (sdp_utils' validate_sdpa_input), two spaces before "query" and all.
      // Without it a Float64 mask on Float32 input promoted the scores and failed two ops
      // later, blaming _softmax's output.
      KILN_CHECK_TYPE(attn_mask.dtype() == kFloat32 || attn_mask.dtype() == query.dtype(),
                      "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: ",
                      scalar_type_name(attn_mask.dtype()), " and  query.dtype: ", scalar_type_name(query.dtype()),
                      " instead.");
      // Added in the query's dtype, as PyTorch adds it in place to the scores.
      additive = attn_mask.dtype() == query.dtype() ? attn_mask : attn_mask.to(query.dtype());
    }
  }
  Tensor keep;
  if (dropout_p > 0.0) {
    Shape shape(query.sizes().begin(), query.sizes().end() - 1);
    shape.push_back(S);
    keep = ops::empty_output(shape, query.dtype(), query.device(), "dropout");
    // p = 1 keeps nothing, as dropout() does, rather than dividing by 1 - p = 0 (a
    // MultiheadAttention built with dropout 1.0 reaches here in training).
    ops::random_data(keep, RandomKind::Bernoulli, 1.0 - dropout_p, 0.0);
    if (dropout_p < 1.0) keep = keep / (1.0 - dropout_p);
  }
  return ScaledDotProductAttentionFn::apply(query, key, value, additive, keep, factor);
}

}  // namespace kiln
