// tests/nn/test_checkpoint.cpp — activation checkpointing (nn::checkpoint,
// nn::checkpoint_sequential): gradients equal to the plain run's bit for bit, with dropout
// drawing the same masks in the recomputation, the random stream left where the plain run
// leaves it, autocast recomputed as it ran, what is (not) kept for backward, and double
// backward (create_graph) through the recomputation.
#include <vector>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

namespace {

/// linear -> relu -> dropout -> linear -> tanh -> linear: parameters inside the region and
/// random numbers drawn in it.
std::shared_ptr<nn::Sequential> mlp_with_dropout() {
  manual_seed(0);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Dropout>(0.5),
      std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(), std::make_shared<nn::Linear>(32, 4)});
}

struct Outcome {
  std::vector<double> output;
  std::vector<std::vector<double>> grads;  // parameters', then the input's
  std::vector<double> next_random;         // what the generator draws after backward
};

/// One forward and backward of `forward` from a fixed seed, on fresh gradients.
template <class Forward>
Outcome run(nn::Module& model, Forward forward) {
  model.zero_grad();
  manual_seed(7);
  const Tensor x = randn({16, 8}).requires_grad_();
  const Tensor y = forward(x);
  y.pow(2).sum().backward();
  Outcome r{values(y), {}, {}};
  for (const Tensor& p : model.parameters()) r.grads.push_back(values(p.grad()));
  r.grads.push_back(values(x.grad()));
  r.next_random = values(randn({16}));
  return r;
}

void expect_identical(const Outcome& plain, const Outcome& checkpointed) {
  EXPECT_EQ(plain.output, checkpointed.output);
  ASSERT_EQ(plain.grads.size(), checkpointed.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i) EXPECT_EQ(plain.grads[i], checkpointed.grads[i]) << "grad " << i;
  EXPECT_EQ(plain.next_random, checkpointed.next_random);
}

/// Bit-for-bit comparisons need a fixed thread count: the default count backs off while the
/// machine is busy, and oneDNN's last bits depend on it (Note [Exact resumption]).
class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(get_num_threads()); }
};

}  // namespace

TEST_F(Checkpoint, GradientsEqualThePlainRunBitForBitWithDropout) {
  auto net = mlp_with_dropout();
  const Outcome plain = run(*net, [&](const Tensor& x) { return (*net)(x); });
  const Outcome checkpointed = run(*net, [&](const Tensor& x) {
    return nn::checkpoint([net](const Tensor& in) { return (*net)(in); }, x);
  });
  expect_identical(plain, checkpointed);
}

TEST_F(Checkpoint, WithoutPreservingTheRandomStateDropoutDrawsNewMasks) {
  // The control for the test above: that test would fail if the recomputation drew new masks.
  auto net = mlp_with_dropout();
  const Outcome plain = run(*net, [&](const Tensor& x) { return (*net)(x); });
  const Outcome fresh_masks = run(*net, [&](const Tensor& x) {
    return nn::checkpoint([net](const TensorList& in) { return TensorList{(*net)(in[0])}; }, {x},
                          /*preserve_rng_state=*/false)[0];
  });
  EXPECT_EQ(plain.output, fresh_masks.output);
  EXPECT_NE(plain.grads.front(), fresh_masks.grads.front());
}

TEST_F(Checkpoint, SequentialInSegmentsEqualsThePlainRunBitForBit) {
  auto net = mlp_with_dropout();
  const Outcome plain = run(*net, [&](const Tensor& x) { return (*net)(x); });
  for (std::int64_t segments : {1, 2, 3, 6}) {
    SCOPED_TRACE(segments);
    expect_identical(plain, run(*net, [&](const Tensor& x) { return nn::checkpoint_sequential(*net, segments, x); }));
  }
}

TEST_F(Checkpoint, SequentialRefusesMoreSegmentsThanModules) {
  auto net = mlp_with_dropout();
  EXPECT_ERROR(nn::checkpoint_sequential(*net, 7, randn({2, 8})),
               "checkpoint_sequential: segments must be in [1, 6] for a Sequential of 6 modules, got 7");
}

TEST_F(Checkpoint, TransformerEncoderLayersCheckpointedOneByOneEqualThePlainRun) {
  manual_seed(0);
  auto encoder = std::make_shared<nn::TransformerEncoder>(
      nn::TransformerEncoderLayerArgs{.d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.2}, 3);
  // [L = 4, N = 4, E = 8] under a causal mask.
  const Tensor mask = nn::generate_square_subsequent_mask(4);
  const Outcome plain = run(*encoder, [&](const Tensor& x) { return (*encoder)(x.view({4, 4, 8}), mask); });
  const Outcome checkpointed = run(*encoder, [&](const Tensor& x) {
    Tensor h = x.view({4, 4, 8});
    for (std::size_t i = 0; i < encoder->layers->size(); ++i) {
      auto layer = std::static_pointer_cast<nn::TransformerEncoderLayer>((*encoder->layers)[i]);
      h = nn::checkpoint([layer](const Tensor& in, const Tensor& m) { return (*layer)(in, m); }, h, mask);
    }
    return h;
  });
  expect_identical(plain, checkpointed);
}

TEST_F(Checkpoint, AutocastIsRecomputedAsItRan) {
  auto net = mlp_with_dropout();
  const auto under_autocast = [](auto forward) {
    return [forward](const Tensor& x) {
      amp::autocast region(DeviceType::CPU, kBFloat16);
      return forward(x).to(kFloat32);
    };
  };
  const Outcome plain = run(*net, under_autocast([net](const Tensor& x) { return (*net)(x); }));
  // Backward runs after the autocast region closed: the recomputation must reopen it.
  const Outcome checkpointed = run(*net, under_autocast([net](const Tensor& x) {
    return nn::checkpoint([net](const Tensor& in) { return (*net)(in); }, x);
  }));
  expect_identical(plain, checkpointed);
}

TEST_F(Checkpoint, KeepsNothingTheRegionsOpsSaved) {
  auto net = mlp_with_dropout();
  const Tensor x = randn({256, 8});
  cpu_empty_cache();
  const auto live_after_forward = [&](auto forward) {
    const std::int64_t before = cpu_allocator_stats().allocated_bytes;
    const Tensor y = forward(x);
    return cpu_allocator_stats().allocated_bytes - before;
  };
  const std::int64_t plain = live_after_forward([&](const Tensor& in) { return (*net)(in); });
  const std::int64_t checkpointed = live_after_forward(
      [&](const Tensor& in) { return nn::checkpoint([net](const Tensor& h) { return (*net)(h); }, in); });
  // Plain: every layer's activations ([256, 32] floats, several of them) wait for backward.
  // Checkpointed: only the output [256, 4] is alive (the input is the caller's).
  EXPECT_GE(plain, 4 * 256 * 32 * 4);
  EXPECT_EQ(checkpointed, 256 * 4 * 4);
}

TEST_F(Checkpoint, UnderNoGradItJustCallsTheFunction) {
  NoGradGuard no_grad;
  int calls = 0;
  const Tensor y = nn::checkpoint(
      [&calls](const Tensor& x) {
        ++calls;
        return x * 2.0;
      },
      tensor({1.0, 2.0}));
  EXPECT_EQ(values(y), (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(calls, 1);
}

TEST_F(Checkpoint, ARecomputationThatSavesDifferentlyIsPyTorchsError) {
  auto calls = std::make_shared<int>(0);
  const Tensor x = tensor({1.0, 2.0}).requires_grad_();
  // The second run (the recomputation) takes a branch that saves more tensors.
  const Tensor y = nn::checkpoint(
      [calls](const Tensor& in) { return ++*calls == 1 ? in.exp() : in.exp().exp(); }, x);
  EXPECT_ERROR(y.sum().backward(),
               "A different number of tensors was saved during the original forward and recomputation");
}

// A gradient penalty (the gradient's norm, differentiated again) through checkpointed
// regions, one of them with dropout: the second-order gradients are the plain run's.
TEST_F(Checkpoint, DoubleBackwardThroughTheRecomputationEqualsThePlainRun) {
  const auto model = mlp_with_dropout();
  model->to(kFloat64);
  const auto penalty = [&](bool checkpointed) {
    model->zero_grad();
    manual_seed(7);
    const Tensor x = randn({4, 8}, TensorOptions().dtype(kFloat64)).requires_grad_();
    const Tensor y = checkpointed ? nn::checkpoint_sequential(*model, 3, x) : (*model)(x);
    const Tensor g = autograd::grad({y.pow(2).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    g.pow(2).sum().backward();
    std::vector<std::vector<double>> r{values(g), values(x.grad())};
    for (const Tensor& p : model->parameters()) r.push_back(values(p.grad()));
    return r;
  };
  const auto plain = penalty(false), checkpointed = penalty(true);
  ASSERT_EQ(plain.size(), checkpointed.size());
  for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(plain[i], checkpointed[i]) << "entry " << i;
  // Not vacuous: the penalty reaches the first layer's weight through the saved activations.
  EXPECT_NE(plain[2], std::vector<double>(plain[2].size(), 0.0));
}

TEST_F(Checkpoint, GradgradcheckThroughACheckpointedProduct) {
  manual_seed(0);
  const Tensor a = randn({3}, TensorOptions().dtype(kFloat64)).requires_grad_();
  const Tensor b = randn({3}, TensorOptions().dtype(kFloat64)).requires_grad_();
  // x * x * y saves its inputs: a first-order recomputation would drop d(saved)/dx.
  EXPECT_TRUE(autograd::gradgradcheck(
      [](const TensorList& in) {
        return nn::checkpoint([](const Tensor& x, const Tensor& y) { return (x * x * y).tanh(); }, in[0], in[1]).sum();
      },
      {a, b}));
}

TEST_F(Checkpoint, CreateGraphAfterAFirstOrderBackwardRecomputesWithTheGraph) {
  const Tensor x = tensor({0.5, -1.5}, TensorOptions().dtype(kFloat64)).requires_grad_();
  const Tensor y = nn::checkpoint([](const Tensor& t) { return t * t * t; }, x).sum();
  const Tensor first = autograd::grad({y}, {x}, {}, /*retain_graph=*/true)[0];
  EXPECT_EQ(values(first), (std::vector<double>{0.75, 6.75}));  // 3x^2
  const Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_EQ(values(autograd::grad({g.sum()}, {x})[0]), (std::vector<double>{3.0, -9.0}));  // 6x
}

TEST_F(Checkpoint, DoubleBackwardLeavesNoCycleBehind) {
  const std::int64_t before = cpu_allocator_stats().allocated_bytes;
  {
    const Tensor x = randn({64, 64}, TensorOptions().dtype(kFloat64)).requires_grad_();
    const Tensor y = nn::checkpoint([](const Tensor& t) { return (t * t).tanh().matmul(t); }, x).sum();
    const Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    g.pow(2).sum().backward();
    EXPECT_GT(cpu_allocator_stats().allocated_bytes, before);
  }
  // The recomputation's graph, the frame and every tensor they held are gone with the outputs.
  EXPECT_EQ(cpu_allocator_stats().allocated_bytes, before);
}
