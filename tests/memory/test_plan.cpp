// tests/memory/test_plan.cpp — memory::plan against the real thing: the peak a planned step
// predicts on the meta device equals the peak the same step reaches on the CPU, byte for byte
// (cpu_allocator_stats() with the cache on), and its reserved peak is within 5 %. Then the
// bounds: batches past 32 bits, byte counts past int64, and bad arguments as one-line errors.
#include <gtest/gtest.h>

#include <limits>

#include "../../examples/support/models.h"
#include "kiln.h"
#include "support/test_util.h"

namespace {

using namespace kiln;

struct Measured {
  std::int64_t peak_allocated = 0;
  std::int64_t peak_reserved = 0;
};

memory::OptimizerFactory adam() {
  return [](const TensorList& p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions(1e-3)); };
}
memory::OptimizerFactory sgd_momentum() {
  return [](const TensorList& p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.01).momentum(0.9)); };
}

/// Two real training steps of a fresh `Model` on the CPU, measured from before the model
/// existed, with the allocator's cache emptied first (as the plan assumes).
template <class Model>
Measured measure(const memory::TensorSpec& input, const memory::OptimizerFactory& make_optimizer,
                 bool mixed_precision = false) {
  set_num_threads(get_num_threads());
  const std::int64_t before = cpu_allocator_stats().allocated_bytes;
  Measured m;
  {
    Model model;
    auto optimizer = make_optimizer(model.parameters());
    const Tensor x = randn(input.sizes);
    const Tensor y = randint(0, 10, {input.sizes[0]});
    cpu_empty_cache();
    cpu_reset_peak_stats();
    for (int step = 0; step < 2; ++step) {
      Tensor loss;
      {
        amp::autocast region(DeviceType::CPU, mixed_precision);
        loss = cross_entropy(model.forward(x), y);
      }
      loss.backward();
      optimizer->step();
      optimizer->zero_grad();
    }
    const CpuAllocatorStats s = cpu_allocator_stats();
    m.peak_allocated = s.peak_allocated_bytes - before;
    m.peak_reserved = s.peak_reserved_bytes - before;
  }
  return m;
}

template <class Model>
memory::MemoryPlan planned(const memory::TensorSpec& input, const memory::OptimizerFactory& make_optimizer,
                           bool mixed_precision = false) {
  Model model;
  return memory::plan(model, input, {{input.sizes[0]}, kInt64}, make_optimizer,
                      {.device = kCPU, .mixed_precision = mixed_precision});
}

void expect_matches(const memory::MemoryPlan& plan, const Measured& real) {
  SCOPED_TRACE(plan.summary());
  EXPECT_EQ(plan.peak_allocated, real.peak_allocated);
  EXPECT_NEAR(static_cast<double>(plan.peak_reserved), static_cast<double>(real.peak_reserved),
              0.05 * static_cast<double>(real.peak_reserved));
}

TEST(MemoryPlan, MlpStepPeakEqualsTheMeasuredOne) {
  const memory::TensorSpec input{{128, 784}};
  expect_matches(planned<examples::Mlp>(input, sgd_momentum()), measure<examples::Mlp>(input, sgd_momentum()));
}

TEST(MemoryPlan, MlpAdamStepPeakEqualsTheMeasuredOne) {
  const memory::TensorSpec input{{128, 784}};
  expect_matches(planned<examples::Mlp>(input, adam()), measure<examples::Mlp>(input, adam()));
}

TEST(MemoryPlan, CnnStepPeakEqualsTheMeasuredOne) {
  const memory::TensorSpec input{{64, 1, 28, 28}};
  expect_matches(planned<examples::Cnn>(input, sgd_momentum()), measure<examples::Cnn>(input, sgd_momentum()));
}

TEST(MemoryPlan, CnnUnderCpuAutocastPeakEqualsTheMeasuredOne) {
  const memory::TensorSpec input{{64, 1, 28, 28}};
  expect_matches(planned<examples::Cnn>(input, adam(), true), measure<examples::Cnn>(input, adam(), true));
}

/// A CNN with batch norm and dropout: buffers updated in place, random masks, a Float64 head.
struct NormalisedCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::BatchNorm2d> norm;
  std::shared_ptr<nn::Linear> head;
  NormalisedCnn() : Module("NormalisedCnn") {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(1, 16, 3, nn::Conv2dOptions{.stride = {2, 2}}));
    norm = register_module("norm", std::make_shared<nn::BatchNorm2d>(16));
    head = register_module("head", std::make_shared<nn::Linear>(16 * 13 * 13, 10));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = dropout(norm->forward(conv->forward(x)).relu(), 0.25, is_training());
    return head->forward(h.flatten(1));
  }
};

TEST(MemoryPlan, BatchNormAndDropoutStepPeakEqualsTheMeasuredOne) {
  const memory::TensorSpec input{{32, 1, 28, 28}};
  expect_matches(planned<NormalisedCnn>(input, adam()), measure<NormalisedCnn>(input, adam()));
}

/// A sequence classifier on the fused LSTM layer: two bidirectional layers over [B, T, 12],
/// the last step, a linear head.
struct LstmClassifier : nn::Module {
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;
  LstmClassifier() : Module("LstmClassifier") {
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(12, 24, nn::RNNBaseOptions{.num_layers = 2,
                                                                                          .batch_first = true,
                                                                                          .bidirectional = true}));
    head = register_module("head", std::make_shared<nn::Linear>(48, 10));
  }
  Tensor forward(const Tensor& x) override { return head->forward(std::get<0>(lstm->forward(x)).select(1, -1)); }
};

TEST(MemoryPlan, FusedLstmStepPeakEqualsTheMeasuredOne) {
  const memory::TensorSpec input{{16, 20, 12}};
  expect_matches(planned<LstmClassifier>(input, adam()), measure<LstmClassifier>(input, adam()));
}

TEST(MemoryPlan, LeavesTheModelAndItsTensorsAsTheyWere) {
  manual_seed(0);
  examples::Mlp model;
  model.eval();
  model.fc2->train();
  const StateDict before = model.state_dict();
  std::vector<const TensorImpl*> identities;
  for (const Tensor& p : model.parameters()) identities.push_back(p.impl());
  const memory::MemoryPlan plan = memory::plan(model, {{32, 784}}, {{32}, kInt64}, adam());
  EXPECT_GT(plan.peak_allocated, 0);
  const TensorList after = model.parameters();
  ASSERT_EQ(after.size(), identities.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].impl(), identities[i]);
    EXPECT_TRUE(after[i].device().is_cpu());
    EXPECT_FALSE(after[i].grad().defined());
  }
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(equal(t, before.at(name))) << name;
  EXPECT_FALSE(model.is_training());
  EXPECT_TRUE(model.fc2->is_training());
  EXPECT_FALSE(model.fc1->is_training());
}

TEST(MemoryPlan, SortsWhatIsLiveAtThePeak) {
  examples::Mlp model;
  const memory::MemoryPlan plan = memory::plan(model, {{128, 784}}, {{128}, kInt64}, adam());
  auto bytes = [&](memory::Category c) { return plan.peak_bytes[static_cast<std::size_t>(c)]; };
  // 784*512 + 512 + 512*256 + 256 + 256*10 + 10 floats, each tensor in its size class.
  std::int64_t params = 0;
  for (const Tensor& p : model.parameters()) params += static_cast<std::int64_t>(cpu_allocation_size(p.nbytes()));
  EXPECT_EQ(bytes(memory::Category::Parameters), params);
  EXPECT_EQ(bytes(memory::Category::Inputs),
            static_cast<std::int64_t>(cpu_allocation_size(128 * 784 * 4) + cpu_allocation_size(128 * 8)));
  std::int64_t total = 0;
  for (std::int64_t b : plan.peak_bytes) total += b;
  EXPECT_EQ(total, plan.peak_allocated);
  // Steady state: Adam's two moments exist throughout the second step.
  EXPECT_EQ(bytes(memory::Category::OptimizerState), 2 * params);
  EXPECT_EQ(plan.peak_step, 2);
  EXPECT_GE(plan.peak_reserved, plan.peak_allocated);
  EXPECT_NE(plan.summary().find("Peak allocated memory"), std::string::npos);
}

TEST(MemoryPlan, EvalUnderNoGradSavesNothingForBackward) {
  examples::Cnn model;
  const memory::TensorSpec input{{64, 1, 28, 28}};
  const memory::MemoryPlan training = memory::plan(model, input, {{64}, kInt64}, adam());
  const memory::MemoryPlan inference =
      memory::plan(model, input, {{64}, kInt64}, adam(), {.device = kCPU, .train = false});
  EXPECT_GT(training.peak_bytes[static_cast<std::size_t>(memory::Category::Activations)], 0);
  EXPECT_EQ(inference.peak_bytes[static_cast<std::size_t>(memory::Category::Activations)], 0);
  EXPECT_EQ(inference.peak_bytes[static_cast<std::size_t>(memory::Category::Gradients)], 0);
  EXPECT_EQ(inference.peak_bytes[static_cast<std::size_t>(memory::Category::OptimizerState)], 0);
  EXPECT_LT(inference.peak_allocated, training.peak_allocated) << inference.summary() << training.summary();
}

TEST(MemoryPlan, AutocastKeepsLowPrecisionActivations) {
  examples::Cnn model;
  const memory::TensorSpec input{{64, 1, 28, 28}};
  const memory::MemoryPlan fp32 = memory::plan(model, input, {{64}, kInt64}, adam());
  const memory::MemoryPlan bf16 = memory::plan(model, input, {{64}, kInt64}, adam(), {.mixed_precision = true});
  // The first relu's output, kept for its backward until late in the backward pass, so it is
  // alive at either plan's peak, wherever the peak falls (that depends on the kernels this
  // CPU has: with native BFloat16 the peak comes earlier, while more is still kept).
  const auto first_relu = [](const memory::MemoryPlan& p) -> const memory::PlannedBlock* {
    for (const memory::PlannedBlock& b : p.top_activations) {
      if (b.described && b.op == "relu" && b.sizes == std::vector<std::int64_t>{64, 32, 28, 28}) return &b;
    }
    return nullptr;
  };
  ASSERT_NE(first_relu(fp32), nullptr) << fp32.summary();
  ASSERT_NE(first_relu(bf16), nullptr) << bf16.summary();
  EXPECT_EQ(first_relu(fp32)->dtype, kFloat32);
  EXPECT_EQ(first_relu(bf16)->dtype, kBFloat16);
  EXPECT_EQ(2 * first_relu(bf16)->requested, first_relu(fp32)->requested);
}

TEST(MemoryPlan, ReplaysTheCudaCachingAllocatorWithoutAGpu) {
  examples::Mlp model;
  const memory::MemoryPlan plan =
      memory::plan(model, {{128, 784}}, {{128}, kInt64}, adam(), {.device = Device("cuda:0"), .capacity = 1 << 30});
  ASSERT_TRUE(plan.fits());
  EXPECT_EQ(plan.peak_allocated % 512, 0);        // the CUDA allocator's rounding
  EXPECT_EQ(plan.peak_reserved % (2 << 20), 0);   // whole segments
  EXPECT_GE(plan.peak_reserved, plan.peak_allocated);

  const memory::MemoryPlan small =
      memory::plan(model, {{128, 784}}, {{128}, kInt64}, adam(), {.device = Device("cuda:0"), .capacity = 6 << 20});
  EXPECT_FALSE(small.fits());
  EXPECT_NE(small.oom_message.find("CUDA out of memory"), std::string::npos) << small.oom_message;
  EXPECT_NE(small.summary().find("OUT OF MEMORY"), std::string::npos);
}

TEST(MemoryPlan, CpuCapacityBoundsThePlanToo) {
  examples::Mlp model;
  const memory::MemoryPlan plan =
      memory::plan(model, {{128, 784}}, {{128}, kInt64}, adam(), {.device = kCPU, .capacity = 4 << 20});
  EXPECT_FALSE(plan.fits());
  EXPECT_NE(plan.oom_message.find("DefaultCPUAllocator: not enough memory"), std::string::npos) << plan.oom_message;
}

TEST(MemoryPlan, MaxBatchFindsTheLargestBatchThatFits) {
  // The plans below are compared with the search's: a oneDNN primitive's scratchpad depends on
  // the thread count, which a busy machine would otherwise lower between them (Note [Sharing the
  // machine]): the search's plan came out 160 KiB above the same batch's one plan later.
  set_num_threads(get_num_threads());
  examples::Mlp model;
  const std::int64_t budget = 48 << 20;
  const memory::BatchSearch found = memory::max_batch(model, {{1, 784}}, {{1}, kInt64}, adam(), {}, budget);
  ASSERT_GT(found.batch, 1);
  EXPECT_EQ(found.budget, budget);
  auto planned_at = [&](std::int64_t batch) {
    return memory::plan(model, {{batch, 784}}, {{batch}, kInt64}, adam(), {.device = kCPU, .capacity = budget});
  };
  const memory::MemoryPlan at = planned_at(found.batch);
  EXPECT_TRUE(at.fits());
  EXPECT_LE(at.peak_reserved, budget);
  const memory::MemoryPlan above = planned_at(found.batch + 1);
  EXPECT_TRUE(!above.fits() || above.peak_reserved > budget);
  EXPECT_EQ(found.plan.peak_reserved, at.peak_reserved);
  EXPECT_LT(found.plans, 40);
}

TEST(MemoryPlan, MaxBatchStopsAtTheLimit) {
  examples::Mlp model;
  const memory::BatchSearch found = memory::max_batch(model, {{1, 784}}, {{1}, kInt64}, adam(), {}, 1 << 30, 100);
  EXPECT_EQ(found.batch, 100);
}

TEST(MemoryPlan, AStepFunctionMarksItsOwnPhases) {
  Tensor loss;
  // On the reference route: a oneDNN matrix product may ask for scratch memory of its own on
  // some CPUs (AVX-512's brgemm kernels do), and what is counted here is the step's tensors.
  const backends::OpKernelsGuard reference_route(DeviceType::CPU, false);
  const memory::MemoryPlan plan = memory::plan([&](memory::PhaseMarker& marker) {
    marker.enter(memory::Phase::Parameters, 0);
    const Tensor w = randn({256, 256}, TensorOptions().device(kMeta).requires_grad(true));
    marker.enter(memory::Phase::Inputs, 0);
    const Tensor x = randn({64, 256}, TensorOptions().device(kMeta));
    marker.enter(memory::Phase::Forward, 1);
    loss = x.matmul(w).relu().sum();
    marker.enter(memory::Phase::Backward, 1);
  });
  EXPECT_EQ(plan.allocations, 5);  // w, x, the product, relu's output, the sum
  // The peak is the sum: C++ keeps the product alive to the end of the full expression, so
  // it is there too, dying inside forward (a temporary), while relu's output is saved for
  // backward and the sum is kept (activations).
  auto bytes = [&](memory::Category c) { return plan.peak_bytes[static_cast<std::size_t>(c)]; };
  EXPECT_EQ(plan.peak_phase, memory::Phase::Forward);
  EXPECT_EQ(plan.peak_op, "sum");
  EXPECT_EQ(bytes(memory::Category::Parameters), 256 * 256 * 4);
  EXPECT_EQ(bytes(memory::Category::Inputs), 64 * 256 * 4);
  EXPECT_EQ(bytes(memory::Category::Activations), 64 * 256 * 4 + 64) << plan.summary();
  EXPECT_EQ(bytes(memory::Category::Temporaries), 64 * 256 * 4) << plan.summary();
  EXPECT_EQ(plan.peak_allocated, 256 * 256 * 4 + 3 * 64 * 256 * 4 + 64);
}

TEST(MemoryPlan, MetaTensorsOutsideAPlanAreNotHeard) {
  const Tensor before = zeros({1024}, kMeta);
  const memory::MemoryPlan plan = memory::plan([&](memory::PhaseMarker&) { const Tensor t = zeros({16}, kMeta); });
  EXPECT_EQ(plan.allocations, 1);
  EXPECT_EQ(plan.peak_allocated, 64);
}

TEST(MemoryPlan, RefusesDevicesItCannotPlanFor) {
  EXPECT_THROW(memory::plan([](memory::PhaseMarker&) {}, {.device = kMeta}), ValueError);
}

// --- bounds (issue 31) -----------------------------------------------------------------------

// At batch 2^32 the weight gradient is a product with K = 2^32, which oneDNN's primitive
// creation divided by zero (SIGFPE); such shapes now take the Eigen route (Note [oneDNN's 32-bit
// sizes]), and a plan of terabytes is a prediction like any other.
TEST(MemoryPlanBounds, BatchesPast32BitsArePlannedNotCrashed) {
  examples::Mlp model;
  const std::int64_t batch = std::int64_t{1} << 32;
  const memory::MemoryPlan plan = memory::plan(model, {{batch, 784}}, {{batch}, kInt64}, sgd_momentum());
  EXPECT_TRUE(plan.fits());
  EXPECT_GT(plan.peak_allocated, batch * (784 + 512 + 256) * 4);
  const memory::MemoryPlan bounded =
      memory::plan(model, {{batch, 784}}, {{batch}, kInt64}, sgd_momentum(), {.capacity = std::int64_t{1} << 40});
  EXPECT_FALSE(bounded.fits());
}

// A budget of 2^62 bytes doubles the batch past 2^32 before anything fails to fit: the same
// SIGFPE, reached by max_batch. The search ends, and its answer fits.
TEST(MemoryPlanBounds, MaxBatchWithAnAstronomicalBudgetEnds) {
  examples::Mlp model;
  const std::int64_t budget = std::int64_t{1} << 62;
  const memory::BatchSearch found =
      memory::max_batch(model, {{1, 784}}, {{1}, kInt64}, sgd_momentum(), {}, budget, std::numeric_limits<std::int64_t>::max());
  EXPECT_GT(found.batch, std::int64_t{1} << 32);
  EXPECT_TRUE(found.plan.fits());
  EXPECT_LE(found.plan.peak_reserved, budget);
}

// Live tensors that add up past int64 are out of memory even on a device without a capacity,
// not a wrapped (negative) peak.
TEST(MemoryPlanBounds, StepsPastInt64BytesRunOutOfMemory) {
  const std::int64_t n = std::int64_t{1} << 59;  // Float32: 2^61 bytes each, four make 2^63
  const memory::MemoryPlan plan = memory::plan([&](memory::PhaseMarker&) {
    const TensorOptions meta = TensorOptions().device(kMeta);
    const Tensor a = empty({n}, meta), b = empty({n}, meta), c = empty({n}, meta), d = empty({n}, meta);
  });
  EXPECT_FALSE(plan.fits());
  EXPECT_EQ(plan.peak_allocated, std::int64_t{3} << 61);
  EXPECT_NE(plan.oom_message.find("DefaultCPUAllocator: not enough memory"), std::string::npos) << plan.oom_message;
}

// An empty batch planned a step that allocated nothing and "fit"; an empty factory threw only
// "bad_function_call"; a factory returning nullptr crashed (SIGSEGV); a negative capacity or
// budget was taken for "none".
TEST(MemoryPlanBounds, BadArgumentsAreOneLineErrors) {
  examples::Mlp model;
  EXPECT_ERROR(memory::plan(model, {{0, 784}}, {{0}, kInt64}, adam()),
               "memory::plan: input sizes must be positive, got [0, 784] (dim 0 is the batch)");
  EXPECT_ERROR(memory::plan(model, {{8, 0}}, {{8}, kInt64}, adam()), "memory::plan: input sizes must be positive, got [8, 0]");
  EXPECT_ERROR(memory::plan(model, {{8, 784}}, {{-1}, kInt64}, adam()),
               "memory::plan: target sizes must be positive, got [-1] (dim 0 is the batch)");
  EXPECT_ERROR(memory::plan(model, {{8, 784}}, {{8}, kInt64}, memory::OptimizerFactory()),
               "memory::plan: make_optimizer is empty; a training step needs a factory that builds its optimizer");
  EXPECT_ERROR(memory::plan(model, {{8, 784}}, {{8}, kInt64},
                            [](const TensorList&) { return std::unique_ptr<optim::Optimizer>(); }),
               "memory::plan: make_optimizer returned nullptr; it must return the optimizer it built");
  // Forward only needs no optimizer.
  EXPECT_TRUE(memory::plan(model, {{8, 784}}, {{8}, kInt64}, memory::OptimizerFactory(), {.train = false}).fits());
  EXPECT_ERROR(memory::plan(model, {{8, 784}}, {{8}, kInt64}, adam(), {.device = Device("cuda:0"), .capacity = -5}),
               "memory::plan: capacity must be a number of bytes, or 0 for the device's own, got -5");
  EXPECT_ERROR(memory::max_batch(model, {{1, 784}}, {{1}, kInt64}, adam(), {}, -1),
               "max_batch: budget must be a number of bytes, or 0 for default_budget(), got -1");
  EXPECT_ERROR(memory::max_batch(model, {{1, 784}}, {{1}, kInt64}, adam(), {}, 1 << 30, 0),
               "max_batch: limit must be at least 1, got 0");
  EXPECT_ERROR(memory::max_batch(model, {{1, 784}}, {{1}, kInt64},
                                 [](const TensorList&) { return std::unique_ptr<optim::Optimizer>(); }, {}, 1 << 30),
               "memory::plan: make_optimizer returned nullptr");
  // The model is left as it was after each refusal.
  EXPECT_FALSE(model.fc1->weight.is_meta());
}

TEST(ModuleSwapTensors, ExchangesByNameAndChecksShapes) {
  examples::Mlp model;
  StateDict replacement{{"fc1.bias", zeros({512})}};
  const Tensor own = model.fc1->bias;
  model.swap_tensors(replacement);
  EXPECT_TRUE(equal(model.fc1->bias, zeros({512})));
  EXPECT_EQ(replacement.at("fc1.bias").impl(), own.impl());
  model.swap_tensors(replacement);
  EXPECT_EQ(model.fc1->bias.impl(), own.impl());

  StateDict wrong_shape{{"fc1.bias", zeros({3})}};
  EXPECT_THROW(model.swap_tensors(wrong_shape), Error);
  StateDict unknown{{"fc9.bias", zeros({3})}};
  EXPECT_THROW(model.swap_tensors(unknown), Error);
  EXPECT_EQ(model.fc1->bias.impl(), own.impl());
}

TEST(CpuAllocatorStats, ReservedPeakFollowsFreshBlocksAndResets) {
  cpu_empty_cache();
  cpu_reset_peak_stats();
  const CpuAllocatorStats start = cpu_allocator_stats();
  EXPECT_EQ(start.peak_reserved_bytes, start.allocated_bytes);
  { const Tensor big = empty({1 << 20}); }  // 4 MiB, freed into the cache
  const CpuAllocatorStats after = cpu_allocator_stats();
  EXPECT_EQ(after.peak_reserved_bytes - start.peak_reserved_bytes, 4 << 20);
  EXPECT_EQ(after.reserved_bytes, after.allocated_bytes + after.cached_bytes);
  cpu_empty_cache();
  cpu_reset_peak_stats();
  EXPECT_EQ(cpu_allocator_stats().peak_reserved_bytes, cpu_allocator_stats().allocated_bytes);
}

TEST(MemoryPlanOnGpu, PeakEqualsCudaMemoryStats) {
  if (!cuda::is_available()) GTEST_SKIP() << "CUDA not available";
  const Device gpu("cuda:0");
  examples::Mlp planned_model;
  const memory::MemoryPlan plan = memory::plan(planned_model, {{128, 784}}, {{128}, kInt64}, adam(), {.device = gpu});
  cuda::synchronize(0);
  const std::int64_t before = cuda::memory_allocated(0);
  {
    examples::Mlp model;
    model.to(gpu);
    auto optimizer = adam()(model.parameters());
    const Tensor x = randn({128, 784}).to(gpu);
    const Tensor y = randint(0, 10, {128}).to(gpu);
    cuda::empty_cache();
    cuda::reset_peak_memory_stats(0);
    for (int step = 0; step < 2; ++step) {
      const Tensor loss = cross_entropy(model.forward(x), y);
      loss.backward();
      optimizer->step();
      optimizer->zero_grad();
    }
    cuda::synchronize(0);
    SCOPED_TRACE(plan.summary() + cuda::memory_summary(0));
    EXPECT_EQ(plan.peak_allocated, cuda::max_memory_allocated(0) - before);
    EXPECT_NEAR(static_cast<double>(plan.peak_reserved), static_cast<double>(cuda::max_memory_reserved(0)),
                0.05 * static_cast<double>(cuda::max_memory_reserved(0)));
  }
}

}  // namespace
