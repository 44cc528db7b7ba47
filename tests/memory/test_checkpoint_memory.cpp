// tests/memory/test_checkpoint_memory.cpp — what activation checkpointing saves, planned and
// measured: train_charlm's Transformer with 4 layers at its default shape (batch 16, context
// 64, width 128, 4 heads), planned by memory::plan and run for real on the CPU allocator, with
// and without --checkpoint-activations. The plan must match the measurement, and the step's
// activation peak (the peak above what lives across steps: parameters, optimizer state,
// inputs) must fall by at least half. The plan must equal the measurement byte for byte. The
// step times are printed beside it (not asserted: a test cannot own the machine's clock).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>

#include "../../examples/support/charlm.h"
#include "kiln.h"
#include "support/test_util.h"

namespace {

using namespace kiln;

const examples::CharModelShape kShape{
    .kind = "transformer", .vocab = 96, .context = 64, .width = 128, .layers = 4, .heads = 4};
constexpr std::int64_t kBatch = 16;

memory::OptimizerFactory adamw() {
  return [](const TensorList& p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(6e-3)); };
}

std::shared_ptr<examples::TransformerCharModel> charlm(bool checkpointed) {
  manual_seed(0);
  auto model = std::make_shared<examples::TransformerCharModel>(kShape);
  model->checkpoint_activations = checkpointed;
  return model;
}

struct Step {
  std::int64_t peak = 0;              // the step's peak of allocated bytes
  std::int64_t activation_peak = 0;   // that peak less what was live when the step began
  double seconds = 0;                 // per step, measured runs only
};

Step planned(bool checkpointed) {
  auto model = charlm(checkpointed);
  const memory::MemoryPlan plan = memory::plan(*model, {{kBatch, kShape.context}, kInt64},
                                               {{kBatch, kShape.context}, kInt64}, adamw(),
                                               {.device = kCPU, .loss = examples::next_character_loss});
  const auto bytes = [&](memory::Category c) { return plan.peak_bytes[static_cast<std::size_t>(c)]; };
  return {plan.peak_allocated,
          plan.peak_allocated - bytes(memory::Category::Parameters) - bytes(memory::Category::OptimizerState) -
              bytes(memory::Category::Inputs)};
}

/// Two steps as memory::plan runs them (the second is the steady state), then timed ones.
/// The loss is its own statement, as in the plan: `loss_fn(model(x), y).backward()` would keep
/// the logits, a temporary of that full expression, alive through backward (Note [Planning on
/// the meta device]).
Step measured(bool checkpointed) {
  set_num_threads(get_num_threads());
  Step s;
  const std::int64_t before = cpu_allocator_stats().allocated_bytes;
  {
    auto model = charlm(checkpointed);
    auto optimizer = adamw()(model->parameters());
    const Tensor x = randint(0, kShape.vocab, {kBatch, kShape.context});
    const Tensor y = randint(0, kShape.vocab, {kBatch, kShape.context});
    const auto step = [&] {
      const Tensor loss = examples::next_character_loss(model->forward(x), y);
      loss.backward();
      optimizer->step();
      optimizer->zero_grad();
    };
    cpu_empty_cache();
    cpu_reset_peak_stats();
    step();
    const std::int64_t live_between_steps = cpu_allocator_stats().allocated_bytes - before;
    step();
    s.peak = cpu_allocator_stats().peak_allocated_bytes - before;
    s.activation_peak = s.peak - live_between_steps;
    // The fastest of a few steps on one thread: on a shared machine, OpenMP's spinning threads
    // and other processes make the mean a measure of the machine's load rather than of the step.
    const int threads = get_num_threads();
    set_num_threads(1);
    s.seconds = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 8; ++i) {
      const auto start = std::chrono::steady_clock::now();
      step();
      s.seconds = std::min(s.seconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    set_num_threads(threads);
  }
  return s;
}

}  // namespace

TEST(CheckpointMemory, CharlmTransformerOf4LayersHalvesItsActivationPeakPlannedAndMeasured) {
  const Step plain_plan = planned(false), checkpointed_plan = planned(true);
  const Step plain = measured(false), checkpointed = measured(true);
  const auto mib = [](std::int64_t b) { return static_cast<double>(b) / (1 << 20); };
  std::printf("train_charlm transformer, 4 layers, batch %lld x %lld, width %lld (peak / activation peak, MiB)\n",
              static_cast<long long>(kBatch), static_cast<long long>(kShape.context),
              static_cast<long long>(kShape.width));
  std::printf("  planned   plain %.2f / %.2f   checkpointed %.2f / %.2f   activation cut %.2fx\n",
              mib(plain_plan.peak), mib(plain_plan.activation_peak), mib(checkpointed_plan.peak),
              mib(checkpointed_plan.activation_peak),
              static_cast<double>(plain_plan.activation_peak) / static_cast<double>(checkpointed_plan.activation_peak));
  std::printf("  measured  plain %.2f / %.2f   checkpointed %.2f / %.2f   activation cut %.2fx\n", mib(plain.peak),
              mib(plain.activation_peak), mib(checkpointed.peak), mib(checkpointed.activation_peak),
              static_cast<double>(plain.activation_peak) / static_cast<double>(checkpointed.activation_peak));
  std::printf("  step time plain %.1f ms   checkpointed %.1f ms   ratio %.2fx\n", plain.seconds * 1e3,
              checkpointed.seconds * 1e3, checkpointed.seconds / plain.seconds);
  // The plan is the real step, with checkpointing as without: the recomputation in backward
  // allocates on the meta device what it allocates on the CPU, in the same order.
  EXPECT_EQ(plain.peak, plain_plan.peak);
  EXPECT_EQ(checkpointed.peak, checkpointed_plan.peak);
  EXPECT_EQ(plain.activation_peak, plain_plan.activation_peak);
  EXPECT_EQ(checkpointed.activation_peak, checkpointed_plan.activation_peak);
  EXPECT_GE(plain_plan.activation_peak, 2 * checkpointed_plan.activation_peak);
  EXPECT_GE(plain.activation_peak, 2 * checkpointed.activation_peak);
}
