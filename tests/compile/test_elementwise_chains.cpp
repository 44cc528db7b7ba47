// tests/compile/test_elementwise_chains.cpp — fuse_elementwise_chains (Note [Elementwise chains
// in one pass]) and the kernel it calls: a chain gives each op's own kernel's bits in every
// floating dtype, with broadcast, strided and in-place operands; the pass fuses only values
// nothing else reads, leaves Eigen's vectorised unary ops out where their bits depend on the
// run, and keeps the Transformer's training step bit for bit.
#include <gtest/gtest.h>

#include "compile/capture.h"
#include "compile/passes.h"
#include "core/cpu/elementwise_chain.h"
#include "core/ops/elementwise.h"
#include "../../examples/support/charlm.h"
#include "support/test_util.h"
#include "compiled_training.h"

namespace kiln {
namespace {

/// Eager and replayed runs compute the same bits only on a fixed thread count (Note [Exact
/// resumption]).
class ElementwiseChains : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(get_num_threads()); }
};

std::size_t chains_in(const compiler::Graph& g) { return g.count(compiler::KernelFamily::ElementwiseChain); }

TEST_F(ElementwiseChains, TheKernelGivesEachOpsBitsInEveryFloatingDtype) {
  using cpu::binary_link;
  using cpu::unary_link;
  manual_seed(4);
  for (const DType dtype : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const TensorOptions options = TensorOptions().dtype(dtype);
    // x [3, 40, 33] (a row longer than one block of the kernel's would be with more rows),
    // a transposed operand, a broadcast row, a scalar, and NaN and infinity among the values.
    Tensor x = randn({3, 40, 33}, options);
    x.view({-1}).narrow(0, 5, 1).fill_(std::nan(""));
    x.view({-1}).narrow(0, 77, 1).fill_(INFINITY);
    const Tensor transposed = randn({3, 33, 40}, options).transpose(1, 2);
    const Tensor row = randn({33}, options), scalar = full({}, 0.125, options);
    const Tensor positive = rand({3, 40, 33}, options) + 0.5;
    struct Case {
      const char* what;
      std::vector<Tensor> inputs;
      std::vector<cpu::ChainLink> links;
      Tensor want;
    };
    const std::vector<Case> cases = {
        {"scale and mask", {x, scalar, row}, {binary_link(BinaryOp::Mul, true), binary_link(BinaryOp::Add, true)},
         x * scalar + row},
        {"value second", {x, transposed, scalar},
         {binary_link(BinaryOp::Div, false), binary_link(BinaryOp::Sub, false)}, scalar - transposed / x},
        {"unary links", {x, row}, {unary_link(UnaryOp::Neg), binary_link(BinaryOp::Maximum, true),
                                   unary_link(UnaryOp::Gelu), unary_link(UnaryOp::Relu)},
         x.neg().maximum(row).gelu().relu()},
        {"relu's backward, pow, minimum", {transposed, x, positive, row},
         {binary_link(BinaryOp::ThresholdBackward, true), binary_link(BinaryOp::Pow, false),
          binary_link(BinaryOp::Minimum, true)},
         positive.pow(ops::binary(BinaryOp::ThresholdBackward, transposed, x)).minimum(row)},
    };
    for (const Case& c : cases) {
      const Tensor got = empty(c.want.sizes(), options);
      cpu::elementwise_chain_kernel(got, c.inputs, c.links);
      EXPECT_TRUE(testing::same_bits(got, c.want)) << c.what << " in " << dtype;
    }
    // Into a strided output, and in place over its first input.
    const Tensor strided = empty({3, 33, 40}, options).transpose(1, 2);
    cpu::elementwise_chain_kernel(strided, {x, scalar}, {binary_link(BinaryOp::Mul, true), unary_link(UnaryOp::Abs)});
    EXPECT_TRUE(testing::same_bits(strided, (x * scalar).abs())) << "strided output in " << dtype;
    const Tensor in_place = x.clone();
    cpu::elementwise_chain_kernel(in_place, {in_place, row}, {binary_link(BinaryOp::Add, true), unary_link(UnaryOp::Neg)});
    EXPECT_TRUE(testing::same_bits(in_place, (x + row).neg())) << "in place in " << dtype;
  }
}

TEST_F(ElementwiseChains, AChainOfOpsEachReadOnceIsOneCallWithTheSameBits) {
  const auto f = [](const Tensor& x, const Tensor& mask) { return ((x * 0.125 + mask).relu() - 1.0).neg(); };
  auto fused = compile(f, {.passes = "fuse_elementwise_chains,plan_memory"});
  auto plain = compile(f, {.passes = "plan_memory"});
  manual_seed(5);
  const Tensor mask = randn({7, 9});
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({5, 7, 9});
    EXPECT_TRUE(testing::same_bits(fused(x, mask), f(x, mask))) << "step " << i;
    EXPECT_TRUE(testing::same_bits(plain(x, mask), f(x, mask))) << "step " << i;
  }
  EXPECT_TRUE(fused.last_call_replayed());
  EXPECT_EQ(chains_in(fused.graph()), 1u) << fused.graph().print();
  EXPECT_EQ(fused.graph().count(compiler::KernelFamily::Binary), 0u) << fused.graph().print();
  EXPECT_EQ(fused.graph().count(compiler::KernelFamily::Unary), 0u) << fused.graph().print();
  EXPECT_EQ(chains_in(plain.graph()), 0u);
  EXPECT_NE(fused.graph().print().find("= elementwise_chain(%in0, "), std::string::npos) << fused.graph().print();
  EXPECT_NE(fused.graph().print().find("{mul(v, %), add(v, %), relu(v), sub(v, %), neg(v)}"), std::string::npos)
      << fused.graph().print();
}

TEST_F(ElementwiseChains, AValueSomethingElseReadsIsKept) {
  // y is read by the add and returned: it must exist, so the chain stops before it, and the
  // ops after it form a chain of their own.
  const auto f = [](const Tensor& x) {
    const Tensor y = (x * 2.0).neg();
    return TensorList{y, (y + 1.0).relu() * 3.0};
  };
  auto step = compile(f, {.passes = "fuse_elementwise_chains"});
  manual_seed(6);
  for (int i = 0; i < 2; ++i) {
    const Tensor x = randn({4, 6});
    const TensorList got = step(x), want = f(x);
    EXPECT_TRUE(testing::same_bits(got[0], want[0]) && testing::same_bits(got[1], want[1])) << "step " << i;
  }
  EXPECT_EQ(chains_in(step.graph()), 2u) << step.graph().print();
  EXPECT_NE(step.graph().print().find("{mul(v, %), neg(v)}"), std::string::npos) << step.graph().print();
  EXPECT_NE(step.graph().print().find("{add(v, %), relu(v), mul(v, %)}"), std::string::npos) << step.graph().print();
}

TEST_F(ElementwiseChains, EigensVectorisedOpsJoinOnlyWhereTheirKernelUsesTheFunctor) {
  // exp on Float32 runs Eigen's vectorised form, whose last bits depend on where an element
  // falls in a run: it stays a call of its own and splits the chain. On BFloat16 exp's kernel
  // uses the functor, so the three ops are one chain.
  const auto f = [](const Tensor& x) { return (x * 0.5).exp() + 1.0; };
  for (const DType dtype : {kFloat32, kBFloat16}) {
    auto step = compile(f, {.passes = "fuse_elementwise_chains"});
    manual_seed(7);
    const Tensor x = randn({33, 17}, TensorOptions().dtype(dtype));
    step(x);
    EXPECT_TRUE(testing::same_bits(step(x), f(x))) << dtype;
    const bool exp_joins = dtype != kFloat32;
    EXPECT_EQ(chains_in(step.graph()), exp_joins ? 1u : 0u) << dtype << "\n" << step.graph().print();
    EXPECT_EQ(step.graph().count(compiler::KernelFamily::Unary), exp_joins ? 0u : 1u) << dtype;
  }
}

TEST_F(ElementwiseChains, TheTransformersStepKeepsItsBits) {
  // train_charlm's step (two layers, AdamW, the gradient clipped) with every pass, and with
  // every pass but this one: the loss's arithmetic and its gradient and the clip's scalar
  // arithmetic are chains, and every loss and parameter keeps its bits. (Self-attention projects
  // query, key and value in one product, so no sum of three input gradients is left to chain.)
  std::vector<std::vector<double>> runs;
  std::vector<std::size_t> chains;
  std::string every_other;
  for (const compiler::Pass& p : compiler::all_passes()) {
    if (std::string(p.name) != "fuse_elementwise_chains") every_other += (every_other.empty() ? "" : ",") + std::string(p.name);
  }
  for (const std::string& passes : {std::string("all"), every_other}) {
    manual_seed(8);
    examples::CharModelShape shape;
    shape.vocab = 30;
    shape.context = 16;
    shape.width = 32;
    shape.heads = 2;
    const auto model = examples::make_char_model(shape);
    optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(3e-3).weight_decay(0.01));
    auto step = compile(
        [&](const Tensor& x, const Tensor& y) { return examples::train_step(*model, optimizer, x, y, 0.5); },
        {.passes = passes});
    std::vector<double> values;
    for (int i = 0; i < 4; ++i) {
      const Tensor x = randint(0, shape.vocab, {3, shape.context}), y = randint(0, shape.vocab, {3, shape.context});
      values.push_back(step(x, y).item<double>());
    }
    for (const Tensor& parameter : model->parameters()) values.push_back(parameter.view({-1})[0].item<double>());
    EXPECT_TRUE(step.last_call_replayed()) << passes;
    runs.push_back(values);
    chains.push_back(chains_in(step.graph()));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_GE(chains[0], 3u) << "the loss, its gradient, the clip's arithmetic";
  EXPECT_EQ(chains[1], 0u);
}

}  // namespace
}  // namespace kiln
