// tests/nn/test_attention.cpp — triu/tril, scaled dot-product attention, MultiheadAttention and
// the Transformer encoder against PyTorch (tests/nn/attention_reference.h, from
// tools/attention_reference.py): outputs, attention weights and state-dict keys; gradcheck in
// Float64; PyTorch's errors for bad shapes and options; what the attention op saves.
#include <gtest/gtest.h>

#include <limits>

#include "autograd/gradcheck.h"
#include "kiln.h"
#include "nn/attention_reference.h"
#include "nn/formula.h"
#include "support/test_util.h"

namespace kiln {
namespace {

namespace ref = attention_reference;

using testing::expect_equals_reference;
using testing::formula;
using testing::load_formula;

const TensorOptions kF64 = TensorOptions().dtype(kFloat64);

/// k % modulus for k = 0, 1, ... in a [rows, cols] Int64 tensor (the scripts' mask patterns).
Tensor remainders(std::int64_t rows, std::int64_t cols, std::int64_t modulus) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<std::int64_t>(k) % modulus;
  return tensor(v).reshape({rows, cols});
}

TEST(Triangular, KeepsTheTriangleAndItsGradient) {
  const Tensor x = arange(1, 13, kF64).reshape({3, 4});
  EXPECT_TRUE(equal(triu(x), tensor({{1.0, 2.0, 3.0, 4.0}, {0.0, 6.0, 7.0, 8.0}, {0.0, 0.0, 11.0, 12.0}})));
  EXPECT_TRUE(equal(tril(x, -1), tensor({{0.0, 0.0, 0.0, 0.0}, {5.0, 0.0, 0.0, 0.0}, {9.0, 10.0, 0.0, 0.0}})));
  EXPECT_TRUE(equal(triu(x, 2), tensor({{0.0, 0.0, 3.0, 4.0}, {0.0, 0.0, 0.0, 8.0}, {0.0, 0.0, 0.0, 0.0}})));
  const Tensor batched = randn({2, 3, 3}, kF64.requires_grad(true));
  EXPECT_TRUE(equal(tril(batched).select(0, 1), tril(batched.select(0, 1))));
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return triu(in[0], 1) * 3 + tril(in[0], -1); },
                                  {batched}));
  EXPECT_ERROR(triu(ones({3})), "triu: input tensor must have at least 2 dimensions");
  // masked_fill (and so triu and tril) keeps the input's dtype, as PyTorch's does.
  EXPECT_EQ(triu(ones({2, 2}, TensorOptions().dtype(kBool))).dtype(), kBool);
  EXPECT_TRUE(equal(ones({3}, TensorOptions().dtype(kInt64)).masked_fill(tensor({true, false, true}), 2.5),
                    tensor(std::vector<std::int64_t>{2, 1, 2})));
}

TEST(ScaledDotProductAttention, MatchesTheWrittenOutFormula) {
  const Tensor q = formula({2, 3, 5, 4}, 1), k = formula({2, 3, 6, 4}, 2), v = formula({2, 3, 6, 2}, 3);
  expect_equals_reference(scaled_dot_product_attention(q, k, v), ref::sdpa_plain);
  const Tensor allowed = remainders(5, 6, 4).ne(1);
  expect_equals_reference(scaled_dot_product_attention(q, k, v, allowed), ref::sdpa_bool_mask);
  expect_equals_reference(scaled_dot_product_attention(q, formula({2, 3, 5, 4}, 2), formula({2, 3, 5, 2}, 3), {},
                                                       0.0, /*is_causal=*/true),
                          ref::sdpa_causal);
}

TEST(ScaledDotProductAttention, GradcheckWithAFloatMaskAndCausally) {
  manual_seed(0);
  const Tensor q = randn({2, 3, 4}, kF64.requires_grad(true)), k = randn({2, 5, 4}, kF64.requires_grad(true));
  const Tensor v = randn({2, 5, 3}, kF64.requires_grad(true)), mask = randn({3, 5}, kF64.requires_grad(true));
  EXPECT_TRUE(autograd::gradcheck(
      [](const TensorList& in) { return scaled_dot_product_attention(in[0], in[1], in[2], in[3]); }, {q, k, v, mask}));
  const Tensor kc = randn({2, 3, 4}, kF64.requires_grad(true)), vc = randn({2, 3, 3}, kF64.requires_grad(true));
  EXPECT_TRUE(autograd::gradcheck(
      [](const TensorList& in) { return scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, 0.3); },
      {q, kc, vc}));
}

TEST(ScaledDotProductAttention, KeepsTheAttentionMatrixOnce) {
  // The op's node saves q, k, v and the probabilities: one [L, S] matrix per head, where the
  // composite (matmul, softmax, dropout, matmul) would save the probabilities and the dropped
  // ones. Measured as bytes alive after forward.
  manual_seed(0);
  const Tensor q = randn({4, 64, 16}, TensorOptions().requires_grad(true));
  const Tensor k = randn({4, 64, 16}, TensorOptions().requires_grad(true));
  const Tensor v = randn({4, 64, 16}, TensorOptions().requires_grad(true));
  const std::int64_t before = cpu_allocator_stats().allocated_bytes;
  const Tensor out = scaled_dot_product_attention(q, k, v, {}, 0.25);
  const std::int64_t kept = cpu_allocator_stats().allocated_bytes - before;
  const std::int64_t matrix = 4 * 64 * 64 * 4;
  EXPECT_LT(kept, 2 * matrix + 2 * out.nbytes() + 4096);  // probabilities + dropout's mask + the output
  out.sum().backward();
  EXPECT_TRUE(q.grad().defined() && k.grad().defined() && v.grad().defined());
}

TEST(ScaledDotProductAttention, BadArgumentsAreErrors) {
  const Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 3});
  EXPECT_ERROR(scaled_dot_product_attention(q, k, v, ones({3, 5}, TensorOptions().dtype(kBool)), 0.0, true),
               "Explicit attn_mask should not be set when is_causal=True");
  EXPECT_ERROR(scaled_dot_product_attention(q, randn({2, 5, 3}), v), "query and key must have the same embedding size");
  EXPECT_ERROR(scaled_dot_product_attention(q, k, randn({2, 4, 3})), "key and value must have the same sequence length");
  EXPECT_ERROR(scaled_dot_product_attention(q, k, v.to(kFloat64)), "Expected query, key, and value to have the same dtype");
}

// p = 1 divided by 1 - p = 0; dropout() keeps nothing there, and so does attention now (a
// MultiheadAttention takes dropout 1.0, as PyTorch's does).
TEST(ScaledDotProductAttention, DropoutOfOneKeepsNothing) {
  const Tensor q = randn({2, 3, 4});
  EXPECT_TRUE(testing::tensors_near(scaled_dot_product_attention(q, q, q, {}, 1.0), zeros({2, 3, 4}), 0.0));
  EXPECT_ERROR(scaled_dot_product_attention(q, q, q, {}, 1.5), "dropout probability has to be between 0 and 1, but got 1.5");
  nn::MultiheadAttention mha(8, 2, {.dropout = 1.0});  // in training, zero biases: out_proj(0) = 0
  const Tensor x = randn({4, 2, 8});
  EXPECT_TRUE(testing::tensors_near(std::get<0>(mha.forward(x, x, x, {}, false)), zeros({4, 2, 8}), 0.0));
}

TEST(MultiheadAttention, MatchesPyTorchWithMasksAndWeights) {
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  EXPECT_EQ(mha.state_dict().keys(), ref::mha_keys);
  load_formula(mha);
  const Tensor x = formula({2, 4, 8}, 1), memory = formula({2, 5, 8}, 2);
  const Tensor padding = tensor({{false, false, false, true, true}, {false, false, false, false, false}});
  const Tensor not_allowed = remainders(4, 5, 3).eq(2);
  const auto [out, weights] = mha.forward(x, memory, memory, padding, true, not_allowed);
  EXPECT_EQ(weights.sizes(), IntArrayRef({2, 4, 5}));
  expect_equals_reference(out, ref::mha_output);
  expect_equals_reference(weights, ref::mha_weights);
  const auto [self, per_head] = mha.forward(x, x, x, {}, true, {}, /*average_attn_weights=*/false);
  expect_equals_reference(self, ref::mha_self_output);
  expect_equals_reference(per_head, ref::mha_self_weights_per_head);
  // Without weights the fused op computes the same output.
  const auto [fused, none] = mha.forward(x, memory, memory, padding, false, not_allowed);
  EXPECT_FALSE(none.defined());
  expect_equals_reference(fused, ref::mha_output);
}

TEST(MultiheadAttention, BatchFirstRowsGiveWhatSequenceFirstRowsGive) {
  // Batch-first input is projected in its own row order (Note [Batch-first rows stay in their
  // order] in nn/attention.cpp): the same outputs, weights and gradients as the same module on
  // the transposed input, self-attention and attention to a memory, with both masks.
  manual_seed(3);
  nn::MultiheadAttention batch_first(8, 2, {.batch_first = true}), sequence_first(8, 2);
  batch_first.to(kFloat64);
  sequence_first.to(kFloat64);
  sequence_first.load_state_dict(batch_first.state_dict());
  const Tensor x = randn({3, 4, 8}, kF64), memory = randn({3, 5, 8}, kF64), g = randn({3, 4, 8}, kF64);
  const Tensor padding = tensor({{false, false, false, true, true}, {false, false, false, false, false},
                                 {false, true, false, false, false}});
  const Tensor not_allowed = remainders(4, 5, 3).eq(2);
  for (const bool self : {true, false}) {
    for (const bool need_weights : {false, true}) {
      TensorList grads[2];
      Tensor outs[2], weights[2];
      for (int i = 0; i < 2; ++i) {
        nn::MultiheadAttention& mha = i == 0 ? batch_first : sequence_first;
        const Tensor q = (i == 0 ? x : x.transpose(0, 1)).detach().as_leaf();
        const Tensor kv = self ? q : (i == 0 ? memory : memory.transpose(0, 1)).detach().as_leaf();
        mha.zero_grad();
        std::tie(outs[i], weights[i]) = self ? mha.forward(q, q, q, {}, need_weights)
                                             : mha.forward(q, kv, kv, padding, need_weights, not_allowed);
        if (i == 1) outs[i] = outs[i].transpose(0, 1);
        outs[i].backward(g);
        grads[i] = {q.grad(), self ? Tensor() : kv.grad(), mha.in_proj_weight.grad(), mha.in_proj_bias.grad(),
                    mha.out_proj->weight.grad()};
      }
      EXPECT_TRUE(testing::tensors_near(outs[0], outs[1], 1e-14)) << self << need_weights;
      if (need_weights) EXPECT_TRUE(testing::tensors_near(weights[0], weights[1], 1e-14)) << self;
      for (std::size_t k = 0; k < grads[0].size(); ++k) {
        ASSERT_EQ(grads[0][k].defined(), grads[1][k].defined()) << k;
        if (!grads[0][k].defined()) continue;
        const Tensor want = k < 2 ? grads[1][k].transpose(0, 1) : grads[1][k];
        EXPECT_TRUE(testing::tensors_near(grads[0][k], want, 1e-13)) << self << need_weights << " gradient " << k;
      }
    }
  }
}

TEST(MultiheadAttention, UnbatchedInputAndGradcheck) {
  manual_seed(0);
  nn::MultiheadAttention mha(6, 3);
  mha.to(kFloat64);
  const Tensor x = randn({4, 6}, kF64.requires_grad(true));
  const auto [out, weights] = mha.forward(x, x, x);
  EXPECT_EQ(out.sizes(), IntArrayRef({4, 6}));
  EXPECT_EQ(weights.sizes(), IntArrayRef({4, 4}));
  const Tensor seq = randn({3, 2, 6}, kF64.requires_grad(true));
  const Tensor causal = nn::generate_square_subsequent_mask(3, kF64);
  EXPECT_TRUE(autograd::gradcheck(
      [&](const TensorList& in) { return std::get<0>(mha.forward(in[0], in[0], in[0], {}, false, causal)); }, {seq}));
}

// One tensor as query, key and value, or as key and value, is projected in one product
// (PyTorch's _in_projection_packed); the output and every gradient are those of three products.
TEST(MultiheadAttention, PackedProjectionsEqualThreeProductsAndPassGradcheck) {
  manual_seed(0);
  nn::MultiheadAttention mha(6, 3, {.batch_first = true});
  mha.to(kFloat64);
  const Tensor x = randn({2, 4, 6}, kF64.requires_grad(true)), memory = randn({2, 5, 6}, kF64.requires_grad(true));
  const Tensor causal = nn::generate_square_subsequent_mask(4, kF64);
  // Views of the same data are other tensors: they take the three products.
  const std::vector<std::pair<TensorList, TensorList>> calls = {
      {{x, x, x}, {x, x.view_as(x), x.view_as(x)}}, {{x, memory, memory}, {x, memory, memory.view_as(memory)}}};
  for (const auto& [packed, apart] : calls) {
    TensorList grads[2];
    Tensor outs[2];
    for (int i = 0; i < 2; ++i) {
      const TensorList& in = i == 0 ? packed : apart;
      mha.zero_grad();
      outs[i] = std::get<0>(mha.forward(in[0], in[1], in[2], {}, false, in[1].size(1) == 4 ? causal : Tensor()));
      grads[i] = autograd::grad({(outs[i] * outs[i]).sum()}, {x, memory, mha.in_proj_weight, mha.in_proj_bias},
                                {}, std::nullopt, false, /*allow_unused=*/true);
    }
    EXPECT_TRUE(testing::tensors_near(outs[0], outs[1], 1e-14));
    for (std::size_t g = 0; g < grads[0].size(); ++g) {
      ASSERT_EQ(grads[0][g].defined(), grads[1][g].defined()) << g;
      if (grads[0][g].defined()) EXPECT_TRUE(testing::tensors_near(grads[0][g], grads[1][g], 1e-13)) << g;
    }
  }
  EXPECT_TRUE(autograd::gradcheck(
      [&](const TensorList& in) { return std::get<0>(mha.forward(in[0], in[1], in[1])); }, {x, memory}));
}

TEST(MultiheadAttention, BadShapesGetPyTorchsErrors) {
  EXPECT_ERROR(nn::MultiheadAttention(10, 3), "embed_dim must be divisible by num_heads");
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = randn({4, 2, 8});
  EXPECT_ERROR(mha.forward(x, x, x, {}, true, ones({3, 4}, TensorOptions().dtype(kBool))),
               "The shape of the 2D attn_mask is [3, 4], but should be (4, 4).");
  EXPECT_ERROR(mha.forward(x, x, x, {}, true, ones({2, 4, 4}, TensorOptions().dtype(kBool))),
               "The shape of the 3D attn_mask is [2, 4, 4], but should be (4, 4, 4).");
  EXPECT_ERROR(mha.forward(x, x, x, {}, true, ones({4, 4}, TensorOptions().dtype(kInt64))),
               "only bool and floating types of attn_mask are supported, not Long");
  EXPECT_ERROR(mha.forward(x, x, x, ones({2, 3}, TensorOptions().dtype(kBool))),
               "expecting key_padding_mask shape of (2, 4), but got [2, 3]");
  EXPECT_ERROR(mha.forward(randn({1, 4, 2, 8}), x, x), "query should be unbatched 2D or batched 3D tensor");
}

// train_charlm --heads 0 died of SIGFPE (issue 31): every count that divides or multiplies is
// checked before a member uses it, with PyTorch's texts. A negative embed_dim used to be
// reported by the allocation of 3 * embed_dim rows ("negative dimension -24").
TEST(MultiheadAttention, HeadsAreCheckedBeforeAnythingDividesByThem) {
  EXPECT_ERROR(nn::MultiheadAttention(8, 0),
               "embed_dim and num_heads must be greater than 0, got embed_dim=8 and num_heads=0 instead");
  EXPECT_ERROR(nn::MultiheadAttention(-8, 2),
               "embed_dim and num_heads must be greater than 0, got embed_dim=-8 and num_heads=2 instead");
  EXPECT_ERROR(nn::MultiheadAttention(8, 3), "embed_dim must be divisible by num_heads (got embed_dim=8 and num_heads=3)");
  EXPECT_ERROR(nn::MultiheadAttention(std::int64_t{1} << 62, 1),
               "in_proj_weight's rows, 3 * embed_dim = 3 * 4611686018427387904 does not fit in int64");
  EXPECT_ERROR(nn::MultiheadAttention(8, 2, {.dropout = 1.5}), "dropout probability has to be between 0 and 1, but got 1.5");
  // The transformer layers pass nhead to their attention, which refuses it first.
  EXPECT_ERROR(nn::TransformerEncoderLayer({.d_model = 8, .nhead = 0}),
               "embed_dim and num_heads must be greater than 0, got embed_dim=8 and num_heads=0 instead");
  EXPECT_ERROR(nn::TransformerEncoder({.d_model = 8, .nhead = -1}, 2), "num_heads=-1 instead");
  EXPECT_ERROR(nn::TransformerEncoder({.d_model = 8, .nhead = 3}, 2), "embed_dim must be divisible by num_heads");
}

// Issue 31: a UInt8 mask was refused with a text that said bytes were supported ("Only float,
// byte, and bool types are supported ..., not Byte"), a Float64 mask on Float32 input failed
// two ops later blaming _softmax, and a key batch other than the query's failed in a view
// ("shape '[4, 10, 4]' is invalid for input of size 96").
TEST(MultiheadAttention, MaskDtypesAndBatchesGetMessagesThatNameThem) {
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = randn({4, 5, 8});
  const TensorOptions byte = TensorOptions().dtype(kUInt8), f64 = TensorOptions().dtype(kFloat64);
  // PyTorch 2.x refuses byte masks (1.13 took them with a deprecation warning).
  EXPECT_ERROR(mha.forward(x, x, x, {}, true, zeros({4, 4}, byte)),
               "only bool and floating types of attn_mask are supported, not Byte");
  EXPECT_ERROR(mha.forward(x, x, x, zeros({5, 4}, byte)),
               "only bool and floating types of key_padding_mask are supported, not Byte");
  for (bool need_weights : {true, false}) {
    EXPECT_ERROR(mha.forward(x, x, x, {}, need_weights, zeros({4, 4}, f64)),
                 "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
                 "Double and  query.dtype: Float instead.");
  }
  EXPECT_ERROR(mha.forward(x, x, x, zeros({5, 4}, f64)),
               "Expected key_padding_mask dtype to be bool or float or to match query dtype, but got "
               "key_padding_mask.dtype: Double and  query.dtype: Float instead.");
  const Tensor other_batch = randn({4, 3, 8});
  EXPECT_ERROR(mha.forward(x, other_batch, other_batch), "was expecting key and value batch size of 5 (query's), but got 3");
  nn::MultiheadAttention first(8, 2, {.batch_first = true});
  EXPECT_ERROR(first.forward(randn({5, 4, 8}), randn({3, 4, 8}), randn({3, 4, 8})),
               "was expecting key and value batch size of 5 (query's), but got 3");

  // A Float32 mask is PyTorch's "float": on Float64 input it is widened, and means what the
  // same mask in Float64 means.
  manual_seed(0);
  nn::MultiheadAttention wide(8, 2);
  wide.to(kFloat64);
  const Tensor x64 = randn({4, 5, 8}, kF64);
  const Tensor mask = randn({4, 4});
  for (bool need_weights : {true, false}) {
    const Tensor narrow_mask = std::get<0>(wide.forward(x64, x64, x64, {}, need_weights, mask));
    const Tensor same_mask = std::get<0>(wide.forward(x64, x64, x64, {}, need_weights, mask.to(kFloat64)));
    EXPECT_TRUE(testing::tensors_near(narrow_mask, same_mask, 1e-12));
  }
}

TEST(ScaledDotProductAttention, AMaskOfAnotherFloatingDtypeIsPyTorchsError) {
  const Tensor q = randn({2, 3, 4});
  EXPECT_ERROR(scaled_dot_product_attention(q, q, q, zeros({3, 3}, kF64)),
               "Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: "
               "Double and  query.dtype: Float instead.");
  EXPECT_ERROR(scaled_dot_product_attention(q, q, q, zeros({3, 3}, TensorOptions().dtype(kInt64))),
               "but got attn_mask.dtype: Long and  query.dtype: Float instead.");
  // Float32 on Float64 input is allowed, added in Float64.
  const Tensor q64 = q.to(kFloat64), mask = randn({3, 3});
  EXPECT_TRUE(testing::tensors_near(scaled_dot_product_attention(q64, q64, q64, mask),
                                    scaled_dot_product_attention(q64, q64, q64, mask.to(kFloat64)), 1e-12));
}

TEST(TransformerEncoder, MatchesPyTorchPostNormAndPreNorm) {
  nn::TransformerEncoderLayerArgs o{.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.0,
                                       .batch_first = true};
  nn::TransformerEncoder post(o, 2);
  EXPECT_EQ(post.state_dict().keys(), ref::encoder_keys);
  load_formula(post);
  post.eval();
  const Tensor mask = nn::generate_square_subsequent_mask(4, kF64);
  expect_equals_reference(post.forward(formula({2, 4, 8}, 1), mask), ref::encoder_postnorm, 1e-12);
  o.norm_first = true;
  o.activation = "gelu";
  nn::TransformerEncoder pre(o, 2);
  load_formula(pre);
  pre.eval();
  expect_equals_reference(pre.forward(formula({2, 4, 8}, 1), mask), ref::encoder_prenorm, 1e-12);
}

TEST(TransformerEncoder, GradcheckThroughALayerWithPadding) {
  manual_seed(0);
  nn::TransformerEncoderLayer layer({.d_model = 4, .nhead = 2, .dim_feedforward = 6, .dropout = 0.0});
  layer.to(kFloat64);
  const Tensor x = randn({3, 2, 4}, kF64.requires_grad(true));
  const Tensor padding = tensor({{false, false, true}, {false, false, false}});
  EXPECT_TRUE(autograd::gradcheck([&](const TensorList& in) { return layer.forward(in[0], {}, padding); }, {x}));
  EXPECT_ERROR(nn::TransformerEncoderLayer({.d_model = 4, .nhead = 2, .activation = "tanh"}),
               "activation should be relu/gelu, not tanh");
}

}  // namespace
}  // namespace kiln
