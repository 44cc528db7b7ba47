// tests/compile/test_fuse_attention.cpp — fuse_attention (Note [Attention as one kernel]): the
// kernels it puts in a step (core/cpu/attention.cpp) against eager attention's ops in Float64,
// on heads that interleave in memory as MultiheadAttention's do, sizes that leave partial
// vectors, with and without masks; Float32 as accurate as the eager ops; and a Transformer layer's
// training compiled with the pass against eager training, with what the pass must leave alone.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>

#include "compile/capture.h"
#include "compile/storage_uses.h"
#include "compiled_training.h"
#include "core/kernels.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::tensors_near;

/// [B, rows, D] heads that interleave as MultiheadAttention's do: head b of a [rows, B * D]
/// projection's output, `b * D` elements into each row.
Tensor interleaved_heads(std::int64_t batch, std::int64_t rows, std::int64_t d, DType dtype) {
  return randn({rows, batch * d}, TensorOptions().dtype(dtype)).view({rows, batch, d}).transpose(0, 1);
}

struct AttentionResults {
  Tensor probs, out, grad_q, grad_k, grad_v;
};

/// Eager attention's ops, as scaled_dot_product_attention runs them, with their gradients.
AttentionResults eager_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
                                 const Tensor& grad_out) {
  const Tensor ql = q.detach().as_leaf(), kl = k.detach().as_leaf(), vl = v.detach().as_leaf();
  Tensor scores = bmm(ql, kl.transpose(1, 2)) * scale;
  if (mask.defined()) scores = scores + mask;
  const Tensor probs = scores.softmax(-1);
  const Tensor out = bmm(probs, vl);
  out.backward(grad_out);
  return {probs.detach(), out.detach(), ql.grad(), kl.grad(), vl.grad()};
}

/// The fused kernels on the same operands.
AttentionResults fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, double scale,
                                 const Tensor& grad_out) {
  const AttentionKernels& kernels = registered_kernels(DeviceType::CPU).attention;
  const TensorOptions like = TensorOptions().dtype(q.dtype());
  const std::int64_t batch = q.size(0), L = q.size(1), S = k.size(1), D = q.size(2);
  AttentionResults r{empty({batch, L, S}, like), empty({batch, L, D}, like), empty({batch, L, D}, like),
                     empty({batch, S, D}, like), empty({batch, S, D}, like)};
  const Tensor s = full({}, scale, like);
  const Tensor expanded_mask = mask.defined() ? mask.expand({batch, L, S}) : Tensor();
  kernels.forward(r.out, r.probs, q, k, v, expanded_mask, s);
  kernels.backward(r.grad_q, r.grad_k, r.grad_v, grad_out, q, k, v, r.probs, s);
  return r;
}

/// An additive causal mask [L, S]: -inf above the diagonal.
Tensor causal_mask(std::int64_t L, std::int64_t S, DType dtype) {
  const Tensor allowed = tril(ones({L, S}, TensorOptions().dtype(kBool)));
  return masked_fill(zeros({L, S}, TensorOptions().dtype(dtype)), allowed.logical_not(),
                     -std::numeric_limits<double>::infinity());
}

struct Case {
  std::int64_t batch, L, S, D;
};

TEST(AttentionKernels, ComputeWhatEagerAttentionComputesInFloat64) {
  manual_seed(3);
  // Whole vectors (charlm's heads), partial ones in every product, one row and one column.
  for (const Case& c : {Case{4, 64, 64, 32}, Case{3, 5, 7, 3}, Case{2, 17, 33, 20}, Case{2, 1, 9, 8}, Case{3, 6, 1, 5}}) {
    const Tensor q = interleaved_heads(c.batch, c.L, c.D, kFloat64), k = interleaved_heads(c.batch, c.S, c.D, kFloat64),
                 v = interleaved_heads(c.batch, c.S, c.D, kFloat64);
    const Tensor grad_out = randn({c.batch, c.L, c.D}, TensorOptions().dtype(kFloat64));
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    const Tensor per_head = randn({c.batch, c.L, c.S}, TensorOptions().dtype(kFloat64));
    for (const Tensor& mask : {Tensor(), c.S >= c.L ? causal_mask(c.L, c.S, kFloat64) : per_head, per_head}) {
      SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.L << "x" << c.S << "x" << c.D
                                        << (mask.defined() ? " masked" : ""));
      const AttentionResults want = eager_attention(q, k, v, mask, scale, grad_out);
      const AttentionResults got = fused_attention(q, k, v, mask, scale, grad_out);
      EXPECT_TRUE(tensors_near(got.probs, want.probs, 1e-14));
      EXPECT_TRUE(tensors_near(got.out, want.out, 1e-13));
      EXPECT_TRUE(tensors_near(got.grad_q, want.grad_q, 1e-13));
      EXPECT_TRUE(tensors_near(got.grad_k, want.grad_k, 1e-13));
      EXPECT_TRUE(tensors_near(got.grad_v, want.grad_v, 1e-13));
    }
  }
}

TEST(AttentionKernels, WriteGradientsWhereverTheirRowsLie) {
  // The pass hands the kernels the destinations of the copies that put heads back side by side:
  // [B, rows, D] views whose batch stride is D.
  manual_seed(5);
  const Case c{3, 6, 6, 4};
  const Tensor q = interleaved_heads(c.batch, c.L, c.D, kFloat64), k = interleaved_heads(c.batch, c.S, c.D, kFloat64),
               v = interleaved_heads(c.batch, c.S, c.D, kFloat64);
  const Tensor grad_out = interleaved_heads(c.batch, c.L, c.D, kFloat64);
  const AttentionResults want = eager_attention(q, k, v, Tensor(), 0.5, grad_out);
  const AttentionKernels& kernels = registered_kernels(DeviceType::CPU).attention;
  const TensorOptions f64 = TensorOptions().dtype(kFloat64);
  const Tensor out = empty({c.L, c.batch, c.D}, f64), probs = empty({c.batch, c.L, c.S}, f64);
  const Tensor dq = empty({c.L, c.batch, c.D}, f64), dk = empty({c.S, c.batch, c.D}, f64),
               dv = empty({c.S, c.batch, c.D}, f64);
  const Tensor scale = full({}, 0.5, f64);
  kernels.forward(out.transpose(0, 1), probs, q, k, v, Tensor(), scale);
  kernels.backward(dq.transpose(0, 1), dk.transpose(0, 1), dv.transpose(0, 1), grad_out, q, k, v, probs, scale);
  EXPECT_TRUE(tensors_near(out.transpose(0, 1), want.out, 1e-13));
  EXPECT_TRUE(tensors_near(dq.transpose(0, 1), want.grad_q, 1e-13));
  EXPECT_TRUE(tensors_near(dk.transpose(0, 1), want.grad_k, 1e-13));
  EXPECT_TRUE(tensors_near(dv.transpose(0, 1), want.grad_v, 1e-13));
}

TEST(AttentionKernels, AreAsAccurateInFloat32AsTheEagerOps) {
  // Each Float32 result against the Float64 one: the fused kernels' largest error is within
  // twice the eager ops' (their products sum in an order of their own).
  manual_seed(8);
  const Case c{8, 64, 64, 32};
  const Tensor q = interleaved_heads(c.batch, c.L, c.D, kFloat64) * 3.0, k = interleaved_heads(c.batch, c.S, c.D, kFloat64),
               v = interleaved_heads(c.batch, c.S, c.D, kFloat64);
  const Tensor grad_out = randn({c.batch, c.L, c.D}, TensorOptions().dtype(kFloat64));
  const Tensor mask = causal_mask(c.L, c.S, kFloat64);
  const double scale = 1.0 / std::sqrt(32.0);
  const AttentionResults exact = eager_attention(q, k, v, mask, scale, grad_out);
  const auto f32 = [](const Tensor& t) { return t.to(kFloat32); };
  const AttentionResults eager = eager_attention(f32(q), f32(k), f32(v), f32(mask), scale, f32(grad_out));
  const AttentionResults fused = fused_attention(f32(q), f32(k), f32(v), f32(mask), scale, f32(grad_out));
  const auto error = [](const Tensor& t, const Tensor& reference) {
    return (t.to(kFloat64) - reference).abs().max().item<double>();
  };
  const std::vector<std::pair<Tensor AttentionResults::*, const char*>> fields{
      {&AttentionResults::probs, "probs"}, {&AttentionResults::out, "out"}, {&AttentionResults::grad_q, "grad_q"},
      {&AttentionResults::grad_k, "grad_k"}, {&AttentionResults::grad_v, "grad_v"}};
  for (const auto& [field, name] : fields) {
    const double eager_error = error(eager.*field, exact.*field), fused_error = error(fused.*field, exact.*field);
    EXPECT_LE(fused_error, 2.0 * eager_error + 1e-7) << name << ": eager errs " << eager_error;
    EXPECT_LT(fused_error, 1e-5) << name;
  }
}

TEST(AttentionKernels, LeaveOutOnlyWhatTheMaskHides) {
  // What Note [What the mask hides is not computed] leaves out, on masks that stress it: each
  // row of each head ends its masked run somewhere else, in no order from row to row (so tiles
  // of rows take their longest), with a hidden score in the middle of some rows too and sizes
  // that leave partial vectors.
  manual_seed(13);
  const Case c{3, 23, 37, 5};
  const Tensor q = interleaved_heads(c.batch, c.L, c.D, kFloat64), k = interleaved_heads(c.batch, c.S, c.D, kFloat64),
               v = interleaved_heads(c.batch, c.S, c.D, kFloat64);
  const Tensor grad_out = randn({c.batch, c.L, c.D}, TensorOptions().dtype(kFloat64));
  Tensor mask = randn({c.batch, c.L, c.S}, TensorOptions().dtype(kFloat64));
  const Tensor hidden_from = randint(1, c.S + 1, {c.batch, c.L, 1});
  const Tensor columns = arange(c.S).view({1, 1, c.S});
  mask = masked_fill(mask, columns >= hidden_from, -std::numeric_limits<double>::infinity());
  mask = masked_fill(mask, (columns == 2).logical_and(hidden_from > 4), -std::numeric_limits<double>::infinity());
  const AttentionResults want = eager_attention(q, k, v, mask, 0.4, grad_out);
  const AttentionResults got = fused_attention(q, k, v, mask, 0.4, grad_out);
  EXPECT_TRUE(tensors_near(got.probs, want.probs, 1e-14));
  EXPECT_TRUE(tensors_near(got.out, want.out, 1e-13));
  EXPECT_TRUE(tensors_near(got.grad_q, want.grad_q, 1e-13));
  EXPECT_TRUE(tensors_near(got.grad_k, want.grad_k, 1e-13));
  EXPECT_TRUE(tensors_near(got.grad_v, want.grad_v, 1e-13));
  // What was left out is what eager makes exactly zero.
  EXPECT_EQ(masked_select(got.probs, columns >= hidden_from).abs().max().item<double>(), 0.0);
}

TEST(AttentionKernels, ComputeARowTheMaskHidesWholeAsEagerDoes) {
  // softmax of a row of -inf is NaN, in eager attention and in the kernel: nothing is left out.
  manual_seed(14);
  const Case c{2, 5, 6, 3};
  const Tensor q = interleaved_heads(c.batch, c.L, c.D, kFloat64), k = interleaved_heads(c.batch, c.S, c.D, kFloat64),
               v = interleaved_heads(c.batch, c.S, c.D, kFloat64);
  Tensor mask = causal_mask(c.L, c.S, kFloat64).clone();
  mask.select(0, 2).fill_(-std::numeric_limits<double>::infinity());
  const AttentionResults want = eager_attention(q, k, v, mask, 0.5, ones({c.batch, c.L, c.D}, kFloat64));
  const AttentionResults got = fused_attention(q, k, v, mask, 0.5, ones({c.batch, c.L, c.D}, kFloat64));
  const auto nan = [](const Tensor& t) { return t != t; };
  for (const Tensor* t : {&got.probs, &got.out}) {
    EXPECT_TRUE(nan(t->select(1, 2)).all().item<bool>());
    EXPECT_FALSE(nan(t->select(1, 1)).any().item<bool>());
  }
  EXPECT_TRUE(tensors_near(got.out.select(1, 3), want.out.select(1, 3), 1e-13));
}

/// The same with dropout in the attention (and the rest of the layer).
struct TinyTransformerWithDropout : testing::TinyTransformer {
  TinyTransformerWithDropout() : TinyTransformer(0.2) {}
};

/// The copies in g that read what an attention kernel wrote.
std::size_t copies_of_attention_results(const compiler::Graph& g) {
  std::set<const Storage*> written;
  std::size_t copies = 0;
  for (const compiler::Node& node : g.nodes) {
    if (node.kind != compiler::Node::Kind::Kernel) continue;
    const compiler::KernelFamily family = node.call->id().family;
    const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();
    const std::vector<bool> writes = std::as_const(*node.call).writes();
    if (family == compiler::KernelFamily::Copy) copies += written.count(compiler::storage_of(*args[1]));
    if (family != compiler::KernelFamily::AttentionForward && family != compiler::KernelFamily::AttentionBackward) {
      continue;
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (writes[i]) written.insert(compiler::storage_of(*args[i]));
    }
  }
  return copies;
}

/// A compiled step's attention.forward and attention.backward calls, and its copies of what they wrote.
struct AttentionCalls {
  std::size_t forward = 0, backward = 0, copies_of_results = 0;
};

/// Trains 20 steps eagerly and compiled side by side (testing::expect_same_training) on a fixed
/// thread count and returns the compiled step's AttentionCalls. SGD, not Adam: the key's bias has
/// a gradient of zero (a softmax does not see a constant added to a row), which the two routes
/// round to different specks that Adam would scale up to lr.
template <class Model>
AttentionCalls expect_same_training(DType dtype, double tolerance, const std::string& passes = "all") {
  set_num_threads(get_num_threads());
  AttentionCalls calls;
  testing::expect_same_training<Model>({6, 3, 16}, 5, dtype, /*adam=*/false, 20, tolerance, passes,
                                       [&](const compiler::Graph& g) {
                                         calls = {g.count(compiler::KernelFamily::AttentionForward),
                                                  g.count(compiler::KernelFamily::AttentionBackward),
                                                  copies_of_attention_results(g)};
                                       });
  return calls;
}

TEST(FuseAttention, ATransformerLayerTrainsAsEagerlyInFloat64) {
  const AttentionCalls calls = expect_same_training<testing::TinyTransformer>(kFloat64, 1e-12);
  EXPECT_EQ(calls.forward, 1u);
  EXPECT_EQ(calls.backward, 1u);
  EXPECT_EQ(calls.copies_of_results, 0u);  // O, dQ, dK and dV written where their copies put them
}

TEST(FuseAttention, ATransformerLayerTrainsAsEagerlyInFloat32) {
  const AttentionCalls calls = expect_same_training<testing::TinyTransformer>(kFloat32, 2e-5);
  EXPECT_EQ(calls.forward, 1u);
  EXPECT_EQ(calls.backward, 1u);
  EXPECT_EQ(calls.copies_of_results, 0u);  // O, dQ, dK and dV written where their copies put them
}

TEST(FuseAttention, ABatchFirstLayerTrainsAsEagerlyAndWritesItsHeadsInPlace) {
  // Its heads go back side by side as [N, L, H, D] (Note [Batch-first rows stay in their
  // order] in nn/attention.cpp): attention writes O, dQ, dK and dV there, through two batch
  // strides, and the copies that did it leave the step (sequence-first rows: through one
  // stride, the two tests above).
  for (const DType dtype : {kFloat64, kFloat32}) {
    const AttentionCalls calls =
        expect_same_training<testing::TinyBatchFirstTransformer>(dtype, dtype == kFloat64 ? 1e-12 : 2e-5);
    EXPECT_EQ(calls.forward, 1u) << dtype;
    EXPECT_EQ(calls.backward, 1u) << dtype;
    EXPECT_EQ(calls.copies_of_results, 0u) << dtype;
  }
}

TEST(FuseAttention, AttentionWithDropoutIsLeftToTheEagerOps) {
  // Dropout multiplies its mask into P between the softmax and the product with V.
  const AttentionCalls calls = expect_same_training<TinyTransformerWithDropout>(kFloat64, 1e-12);
  EXPECT_EQ(calls.forward, 0u);
  EXPECT_EQ(calls.backward, 0u);
}

TEST(FuseAttention, IsSwitchedOffByLeavingItOutOfThePasses) {
  const AttentionCalls calls =
      expect_same_training<testing::TinyTransformer>(kFloat64, 1e-12, "fold_constants,plan_memory");
  EXPECT_EQ(calls.forward, 0u);
  EXPECT_EQ(calls.backward, 0u);
}

}  // namespace
}  // namespace kiln
