// tests/compile/test_read_heads_in_place.cpp — read_heads_in_place (Note [Heads read where the
// projection wrote them]): compose_view's views against the copies they replace, the attention
// kernels on heads through two batch strides against the same heads copied, and a Transformer
// layer's step with the pass against the step without it (same bits) and against eager.
#include <gtest/gtest.h>

#include <string>

#include "compile/passes.h"
#include "compile/storage_uses.h"
#include "compiled_training.h"
#include "core/kernels.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

using compiler::compose_view;

/// x: [L, N, E] rows of a packed [L, N, 3E] projection, the middle third (row stride 3E).
Tensor middle_chunk(std::int64_t L, std::int64_t N, std::int64_t E, DType dtype) {
  return arange(0, L * N * 3 * E, 1, TensorOptions().dtype(dtype)).view({L, N, 3 * E}).chunk(3, -1)[1];
}

TEST(ComposeView, SplitsTheHeadsThatNoOneStrideWalks) {
  // MultiheadAttention's heads of a chunk: contiguous() first, then [L, N·H, D] -> [N·H, L, D].
  const std::int64_t L = 3, N = 2, H = 2, D = 4;
  const Tensor x = middle_chunk(L, N, H * D, kFloat64);
  const Tensor y = x.contiguous();
  const Tensor heads = y.view({L, N * H, D}).transpose(0, 1);
  const std::optional<Tensor> composed = compose_view(heads, y, x);
  ASSERT_TRUE(composed.has_value());
  EXPECT_EQ(composed->sizes(), IntArrayRef({N, H, L, D}));
  EXPECT_EQ(composed->strides(), IntArrayRef({3 * H * D, D, N * 3 * H * D, 1}));
  EXPECT_EQ(composed->impl()->storage().get(), x.impl()->storage().get());
  EXPECT_TRUE(equal(composed->reshape({N * H, L, D}), heads));
}

TEST(ComposeView, KeepsAViewThatStaysInsideEachDim) {
  const Tensor x = middle_chunk(4, 3, 6, kFloat64);
  const Tensor y = x.contiguous();
  // A slice that starts inside y, and a transposed one: each dim steps through one dim of y.
  for (const Tensor& a : {y.narrow(0, 1, 2).narrow(2, 2, 3), y.transpose(0, 2)}) {
    const std::optional<Tensor> composed = compose_view(a, y, x);
    ASSERT_TRUE(composed.has_value());
    EXPECT_EQ(composed->sizes(), a.sizes());
    EXPECT_TRUE(equal(*composed, a));
  }
}

TEST(ComposeView, RefusesAViewThatCarriesUnevenly) {
  const Tensor x = middle_chunk(2, 2, 6, kFloat64);
  const Tensor y = x.contiguous();  // [2, 2, 6]
  // Steps of 4 through a dim of 6 do not wrap evenly; a walk that starts past its step's first
  // place wraps into the next dim at another place; a view of other memory is not y's.
  EXPECT_FALSE(compose_view(ops::as_strided(y, {3}, {4}, 0), y, x).has_value());
  EXPECT_FALSE(compose_view(ops::as_strided(y, {3}, {3}, 4), y, x).has_value());
  EXPECT_FALSE(compose_view(y.clone(), y, x).has_value());
}

TEST(AttentionKernels, ReadAndWriteHeadsThroughTwoBatchStrides) {
  // The heads as the pass hands them over ([N, H, L, D] views of packed [L, N, 3E] rows) and the
  // same heads copied into [N·H, L, D]: the same bits, read and written.
  manual_seed(3);
  const std::int64_t L = 5, N = 3, H = 2, D = 4, E = H * D;
  const TensorOptions f64 = TensorOptions().dtype(kFloat64);
  const Tensor packed = randn({L, N, 3 * E}, f64), grad_out = randn({N * H, L, D}, f64);
  const auto split_heads = [&](std::int64_t third) {  // [N, H, L, D] over packed's rows
    return packed.narrow(2, third * E, E).view({L, N, H, D}).permute({1, 2, 0, 3});
  };
  const auto copied_heads = [&](std::int64_t third) {
    return packed.narrow(2, third * E, E).contiguous().view({L, N * H, D}).transpose(0, 1);
  };
  const Tensor mask = triu(full({L, L}, -std::numeric_limits<double>::infinity(), f64), 1).expand({N * H, L, L});
  const Tensor scale = full({}, 0.5, f64);
  const AttentionKernels& kernels = registered_kernels(DeviceType::CPU).attention;
  Tensor out[2], probs[2], grads[2];
  for (int split = 0; split < 2; ++split) {
    const auto heads = [&](std::int64_t third) { return split == 1 ? split_heads(third) : copied_heads(third); };
    out[split] = empty({N * H, L, D}, f64);
    probs[split] = empty({N * H, L, L}, f64);
    kernels.forward(out[split], probs[split], heads(0), heads(1), heads(2), mask, scale);
    if (split == 1) {
      grads[split] = empty({L, N, 3 * E}, f64);
      const auto grad_heads = [&](std::int64_t third) {
        return grads[split].narrow(2, third * E, E).view({L, N, H, D}).permute({1, 2, 0, 3});
      };
      kernels.backward(grad_heads(0), grad_heads(1), grad_heads(2), grad_out, heads(0), heads(1), heads(2),
                       probs[split], scale);
    } else {
      Tensor dq = empty({N * H, L, D}, f64), dk = empty({N * H, L, D}, f64), dv = empty({N * H, L, D}, f64);
      kernels.backward(dq, dk, dv, grad_out, heads(0), heads(1), heads(2), probs[split], scale);
      const auto packed_back = [&](const Tensor& g) { return g.transpose(0, 1).reshape({L, N, E}); };
      grads[split] = cat({packed_back(dq), packed_back(dk), packed_back(dv)}, 2);
    }
  }
  EXPECT_TRUE(testing::same_bits(out[1], out[0]));
  EXPECT_TRUE(testing::same_bits(probs[1], probs[0]));
  EXPECT_TRUE(testing::same_bits(grads[1], grads[0]));
}

/// Every pass but read_heads_in_place.
std::string all_passes_but_this_one() {
  std::string names;
  for (const compiler::Pass& p : compiler::all_passes()) {
    if (std::string(p.name) != "read_heads_in_place") names += (names.empty() ? "" : ",") + std::string(p.name);
  }
  return names;
}

struct Counts {
  std::size_t copies = 0, cats = 0, attention = 0;
};
template <class Model = testing::TinyTransformer>
Counts counts_after(const std::string& passes) {
  Counts c;
  testing::expect_same_training<Model>({6, 3, 16}, 5, kFloat64, /*adam=*/false, 20, 1e-12, passes,
                                                 [&](const compiler::Graph& g) {
                                                   c = {g.count(compiler::KernelFamily::Copy),
                                                        g.count(compiler::KernelFamily::Cat),
                                                        g.count(compiler::KernelFamily::AttentionForward) +
                                                            g.count(compiler::KernelFamily::AttentionBackward)};
                                                 });
  return c;
}

TEST(ReadHeadsInPlace, DropsTheCopiesOfTheHeadsAndTheCatOfTheirGradients) {
  set_num_threads(get_num_threads());
  // Both trained against eager training in Float64 (expect_same_training): 20 steps, 1e-12.
  const Counts with = counts_after("all"), without = counts_after(all_passes_but_this_one());
  EXPECT_EQ(with.attention, 2u);
  EXPECT_EQ(without.attention, 2u);
  EXPECT_EQ(without.copies - with.copies, 3u);  // q, k and v
  EXPECT_EQ(without.cats, 1u);                  // dQ, dK and dV side by side
  EXPECT_EQ(with.cats, 0u);
}

TEST(ReadHeadsInPlace, ReadsBatchFirstHeadsAndWritesTheirGradientsInPlace) {
  set_num_threads(get_num_threads());
  const Counts with = counts_after<testing::TinyBatchFirstTransformer>("all"),
               without = counts_after<testing::TinyBatchFirstTransformer>(all_passes_but_this_one());
  // Both trained against eager training in Float64 (expect_same_training): 20 steps, 1e-12.
  EXPECT_EQ(with.attention, 2u);
  EXPECT_EQ(without.attention, 2u);
  // q, k and v, and dO: its heads [N, L, H, D] seen as [N·H, L, D] are a copy in eager.
  EXPECT_EQ(without.copies - with.copies, 4u);
  EXPECT_EQ(without.cats, 1u);
  EXPECT_EQ(with.cats, 0u);
}

TEST(ReadHeadsInPlace, KeepsEveryBit) {
  set_num_threads(get_num_threads());
  const auto none = [](const Tensor&) { return false; };
  for (DType dtype : {kFloat32, kFloat64}) {
    const testing::CompiledRun with =
        testing::train_compiled<testing::TinyTransformer>("all", dtype, {6, 3, 16}, 5, none);
    const testing::CompiledRun without =
        testing::train_compiled<testing::TinyTransformer>(all_passes_but_this_one(), dtype, {6, 3, 16}, 5, none);
    EXPECT_EQ(with.values, without.values) << dtype;
  }
}

}  // namespace
}  // namespace kiln
