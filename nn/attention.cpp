// nn/attention.cpp — MultiheadAttention: the projections, the masks merged into one additive
// mask per head, and attention (explicit when the weights are wanted, the fused op otherwise),
// following torch.nn.functional.multi_head_attention_forward.
#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/functions/attention.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "core/creation.h"
#include "core/shape.h"
#include "nn/init.h"

namespace kiln::nn {

// Note [Batch-first rows stay in their order]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch's multi_head_attention_forward works on [L, N, E]: batch-first input is transposed
// first, so each projection reads it through a transposed view (a copy of the whole input
// before the product), the output comes back as [L, N, E] to be transposed again, and every
// reader of it (the residual add, the norm after it) walks a transposed view, in backward too.
// The projections are row by row, so the rows' order is free: batch-first input is projected as
// it lies, [N, L, E]; its heads are taken from that ([N, L, H, D] -> [N·H, L, D], one copy per
// projection, as the sequence-first heads take), and the heads are put back side by side as
// [N, L, E], which the output projection maps to the result as the caller wants it (PyTorch's
// native fast path, _native_multi_head_attention, keeps the batch order the same way). No value
// of a row changes; a weight's or bias's gradient adds the same rows in another order. The eager
// step loses the input's copy and the transposed reads, and gains a copy of dO's heads in
// backward ([N, L, H, D] seen as [N·H, L, D]): train_charlm's eager step, the two layouts turn
// by turn in one process (2-core Zen 4), 1.00-1.005x in five rounds of six (1.05x in a noisy
// one). A compiled step, whose attention kernels read and write heads through two batch strides
// (compile/passes/fuse_attention.cpp, read_heads_in_place.cpp), loses all of them: 214 -> 208
// kernels, 1.01-1.025x.

namespace {

/// embed_dim / num_heads, once the constructor's arguments are checked: head_dim is the first
/// member that needs them, so the checks run before anything divides by num_heads or allocates
/// 3 * embed_dim rows. PyTorch's checks and texts; a TransformerEncoderLayer's nhead arrives
/// here too (train_charlm --heads 0 died of SIGFPE, issue 31).
std::int64_t checked_head_dim(std::int64_t embed_dim, std::int64_t num_heads, const MultiheadAttentionArgs& o) {
  KILN_CHECK_VALUE(embed_dim > 0 && num_heads > 0, "embed_dim and num_heads must be greater than 0, got embed_dim=",
                   embed_dim, " and num_heads=", num_heads, " instead");
  KILN_CHECK_VALUE(embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads (got embed_dim=", embed_dim,
                   " and num_heads=", num_heads, ")");
  KILN_CHECK_VALUE(o.dropout >= 0.0 && o.dropout <= 1.0, "dropout probability has to be between 0 and 1, but got ",
                   o.dropout);
  multiply_sizes(3, embed_dim, "in_proj_weight's rows, 3 * embed_dim");
  return embed_dim / num_heads;
}

}  // namespace

MultiheadAttention::MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads,
                                       const MultiheadAttentionArgs& options)
    : Module("MultiheadAttention"),
      embed_dim(embed_dim),
      num_heads(num_heads),
      head_dim(checked_head_dim(embed_dim, num_heads, options)),
      options(options),
      in_proj_weight(register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}))),
      in_proj_bias(register_parameter("in_proj_bias", options.bias ? empty({3 * embed_dim}) : Tensor())) {
  out_proj = register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, options.bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

std::tuple<Tensor, Tensor> MultiheadAttention::call_hooked(const Tensor& query, const Tensor& key,
                                                           const Tensor& value, const Tensor& key_padding_mask,
                                                           bool need_weights, const Tensor& attn_mask,
                                                           bool average_attn_weights) {
  const TensorList out = call_with_hooks({query, key, value, key_padding_mask, attn_mask}, [&](const TensorList& args) {
    const auto [output, weights] =
        forward(args[0], args[1], args[2], args[3], need_weights, args[4], average_attn_weights);
    return TensorList{output, weights};
  });
  return {out[0], out[1]};
}

std::string MultiheadAttention::extra_repr() const {
  // PyTorch prints only out_proj, as a child.
  return "";
}

namespace {

std::string sizes_tuple(IntArrayRef s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

/// PyTorch's rules for a mask's dtype: bool or floating (torch.nn.functional._canonical_mask,
/// PyTorch 2.x; 1.13 still took UInt8 with a deprecation warning, which 2.x refuses), and a
/// floating mask Float32 or the query's dtype (scaled_dot_product_attention's check, where
/// PyTorch's MultiheadAttention sends it). Without the second, a Float64 mask on Float32 input
/// promoted the scores and failed two ops later, blaming _softmax's output.
void check_mask_dtype(const char* name, const Tensor& mask, DType query) {
  KILN_CHECK_TYPE(mask.dtype() == kBool || mask.is_floating_point(), "only bool and floating types of ", name,
                  " are supported, not ", scalar_type_name(mask.dtype()));
  // Two spaces before "query.dtype", as PyTorch prints it.
  KILN_CHECK_TYPE(mask.dtype() == kBool || mask.dtype() == kFloat32 || mask.dtype() == query, "Expected ", name,
                  " dtype to be bool or float or to match query dtype, but got ", name, ".dtype: ",
                  scalar_type_name(mask.dtype()), " and  query.dtype: ", scalar_type_name(query), " instead.");
}

}  // namespace

std::tuple<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query_in, const Tensor& key_in,
                                                       const Tensor& value_in, const Tensor& key_padding_mask_in,
                                                       bool need_weights, const Tensor& attn_mask_in,
                                                       bool average_attn_weights) {
  KILN_CHECK(query_in.dim() == 2 || query_in.dim() == 3,
             "query should be unbatched 2D or batched 3D tensor but received ", query_in.dim(), "-D query tensor");
  const bool batched = query_in.dim() == 3;
  KILN_CHECK(key_in.dim() == query_in.dim() && value_in.dim() == query_in.dim(), "For ",
             batched ? "batched (3-D)" : "unbatched (2-D)", " `query`, expected `key` and `value` to be ",
             query_in.dim(), "-D but found ", key_in.dim(), "-D and ", value_in.dim(), "-D tensors respectively");
  // Sequence first, batched: [L, N, E]; the projections of batch-first input keep its rows'
  // order (Note [Batch-first rows stay in their order]).
  const bool rows_batch_first = batched && options.batch_first;
  auto layout = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(1);
    return options.batch_first ? t.transpose(0, 1) : t;
  };
  const Tensor query = layout(query_in), key = layout(key_in), value = layout(value_in);
  const std::int64_t L = query.sizes()[0], N = query.sizes()[1], S = key.sizes()[0];
  KILN_CHECK(query.sizes()[2] == embed_dim, "was expecting embedding dimension of ", embed_dim, ", but got ",
             query.sizes()[2]);
  KILN_CHECK(key.sizes() == value.sizes(), "key shape ", key.sizes(), " does not match value shape ", value.sizes());
  KILN_CHECK(key.sizes()[2] == embed_dim, "was expecting key embedding dimension of ", embed_dim, ", but got ",
             key.sizes()[2]);
  // PyTorch has no check of its own here and fails in the heads' view ("shape '[5, 8, 4]' is
  // invalid for input of size 240"); this says which dim disagrees, in its words for the others.
  KILN_CHECK(key.sizes()[1] == N, "was expecting key and value batch size of ", N, " (query's), but got ",
             key.sizes()[1]);

  // One additive mask [N * heads or 1, L or 1, S]: -inf where attention may not look.
  const double minus_infinity = -std::numeric_limits<double>::infinity();
  const TensorOptions like_query = TensorOptions().dtype(query.dtype()).device(query.device());
  // A floating mask is added in the query's dtype (a Float32 mask on Float64 input is widened).
  auto additive = [&](const Tensor& mask) {
    if (mask.dtype() != kBool) return mask.dtype() == query.dtype() ? mask : mask.to(query.dtype());
    return masked_fill(zeros(mask.sizes(), like_query), mask, minus_infinity);
  };
  Tensor mask;
  if (attn_mask_in.defined()) {
    check_mask_dtype("attn_mask", attn_mask_in, query.dtype());
    if (attn_mask_in.dim() == 2) {
      KILN_CHECK(attn_mask_in.sizes() == IntArrayRef({L, S}), "The shape of the 2D attn_mask is ",
                 attn_mask_in.sizes(), ", but should be (", L, ", ", S, ").");
      mask = additive(attn_mask_in).unsqueeze(0);
    } else if (attn_mask_in.dim() == 3) {
      KILN_CHECK(attn_mask_in.sizes() == IntArrayRef({N * num_heads, L, S}), "The shape of the 3D attn_mask is ",
                 attn_mask_in.sizes(), ", but should be ", sizes_tuple({N * num_heads, L, S}), ".");
      mask = additive(attn_mask_in);
    } else {
      KILN_FAIL("attn_mask's dimension ", attn_mask_in.dim(), " is not supported");
    }
  }
  if (key_padding_mask_in.defined()) {
    const Tensor kpm = batched ? key_padding_mask_in : key_padding_mask_in.unsqueeze(0);
    check_mask_dtype("key_padding_mask", kpm, query.dtype());
    KILN_CHECK(kpm.sizes() == IntArrayRef({N, S}), "expecting key_padding_mask shape of (", N, ", ", S,
               "), but got ", kpm.sizes());
    const Tensor padding =
        additive(kpm).view({N, 1, 1, S}).expand({N, num_heads, 1, S}).reshape({N * num_heads, 1, S});
    mask = mask.defined() ? mask + padding : padding;
  }

  // Projections, then heads: [L, N, E] -> [N * heads, L, head_dim]. What one tensor feeds is
  // projected in one product, as PyTorch's _in_projection_packed does: self-attention with the
  // whole in_proj_weight (3 * E outputs where three products would each read the input, and in
  // backward one product for the input's gradient where three would be summed), key and value
  // of one memory with its last two thirds.
  const Tensor& query_rows = rows_batch_first ? query_in : query;
  const Tensor& key_rows = rows_batch_first ? key_in : key;
  const Tensor& value_rows = rows_batch_first ? value_in : value;
  TensorList projected;
  if (query_in.is_same(key_in) && key_in.is_same(value_in)) {
    projected = linear(query_rows, in_proj_weight, in_proj_bias).chunk(3, -1);
  } else if (key_in.is_same(value_in)) {
    const TensorList w = in_proj_weight.split({embed_dim, 2 * embed_dim});
    const TensorList b = in_proj_bias.defined() ? in_proj_bias.split({embed_dim, 2 * embed_dim}) : TensorList(2);
    projected = linear(key_rows, w[1], b[1]).chunk(2, -1);
    projected.insert(projected.begin(), linear(query_rows, w[0], b[0]));
  } else {
    const TensorList w = in_proj_weight.chunk(3, 0);
    const TensorList b = in_proj_bias.defined() ? in_proj_bias.chunk(3, 0) : TensorList(3);
    projected = {linear(query_rows, w[0], b[0]), linear(key_rows, w[1], b[1]), linear(value_rows, w[2], b[2])};
  }
  // Head n·heads + h of either layout is batch n's head h, which is what the masks index.
  auto heads = [&](const Tensor& x, std::int64_t length) {
    if (rows_batch_first) {
      return x.view({N, length, num_heads, head_dim})
          .transpose(1, 2)
          .contiguous()
          .view({N * num_heads, length, head_dim});
    }
    return x.contiguous().view({length, N * num_heads, head_dim}).transpose(0, 1);
  };
  const Tensor q = heads(projected[0], L), k = heads(projected[1], S), v = heads(projected[2], S);
  const double dropout_p = is_training() ? options.dropout : 0.0;

  Tensor attended, weights;
  if (need_weights) {
    // The weights are an output: computed explicitly, as PyTorch does on this path.
    Tensor scores = bmm(q / std::sqrt(static_cast<double>(head_dim)), k.transpose(1, 2));
    if (mask.defined()) scores = scores + mask;
    weights = scores.softmax(-1);
    if (dropout_p > 0.0) weights = dropout(weights, dropout_p, true);
    attended = bmm(weights, v);
  } else {
    attended = scaled_dot_product_attention(q, k, v, mask, dropout_p);
  }
  // The heads side by side again, in the rows' order: [N, L, E] or [L, N, E].
  const Tensor rows =
      rows_batch_first
          ? attended.view({N, num_heads, L, head_dim}).transpose(1, 2).contiguous().view({N * L, embed_dim})
          : attended.transpose(0, 1).contiguous().view({L * N, embed_dim});
  const Shape out_sizes = rows_batch_first ? Shape{N, L, embed_dim} : Shape{L, N, embed_dim};
  const Tensor out = (*out_proj)(rows).view(out_sizes);
  if (need_weights) {
    weights = weights.view({N, num_heads, L, S});
    if (average_attn_weights) weights = weights.sum({1}) / static_cast<double>(num_heads);
    if (!batched) weights = weights.squeeze(0);
  }
  if (!batched) return {out.squeeze(1), weights};
  return {out, weights};
}

}  // namespace kiln::nn
