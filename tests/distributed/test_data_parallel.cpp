// tests/distributed/test_data_parallel.cpp — DistributedDataParallel under `mpirun -np 2`:
// ranks × half batches train to the weights one process reaches on the whole batch; buckets
// launch while backward still runs; no_sync accumulates; models that differ across ranks and
// parameters without gradients are clear errors. Each rank computes the one-process reference
// itself, from the same seed.
#include <gtest/gtest.h>

#include <algorithm>

#include "distributed/data_parallel.h"
#include "distributed_setup.h"
#include "support/test_util.h"

namespace kiln::nn {
namespace {

using distributed::ensure_process_group;
using distributed::get_rank;
using distributed::get_world_size;

struct SmallMlp : Module {
  std::shared_ptr<Linear> fc1, fc2, fc3;
  std::shared_ptr<BatchNorm1d> norm;
  explicit SmallMlp(bool batch_norm, std::int64_t hidden = 32) : Module("SmallMlp") {
    fc1 = register_module("fc1", std::make_shared<Linear>(20, hidden));
    if (batch_norm) norm = register_module("norm", std::make_shared<BatchNorm1d>(hidden));
    fc2 = register_module("fc2", std::make_shared<Linear>(hidden, hidden));
    fc3 = register_module("fc3", std::make_shared<Linear>(hidden, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = fc1->forward(x);
    if (norm) h = norm->forward(h);
    return fc3->forward(fc2->forward(h.relu()).relu());
  }
};

std::shared_ptr<SmallMlp> seeded_model(bool batch_norm, DType dtype, std::uint64_t seed = 7) {
  manual_seed(seed);
  auto m = std::make_shared<SmallMlp>(batch_norm);
  m->to(dtype);
  return m;
}

/// Step `step`'s whole batch of 64: the same on every rank.
std::pair<Tensor, Tensor> batch_of_64(int step, DType dtype) {
  manual_seed(1000 + static_cast<std::uint64_t>(step));
  return {randn({64, 20}).to(dtype), randint(0, 5, {64})};
}

double tolerance(DType dtype) { return dtype == kFloat64 ? 1e-12 : 1e-6; }

/// 5 SGD-momentum steps of 2 ranks x 32 against 1 process x 64. With BatchNorm each rank
/// normalises its own half (as PyTorch's DDP does without SyncBatchNorm), so the reference is
/// the mean of the two halves' losses, and rank 0's running statistics are everyone's.
void expect_ddp_matches_one_process(bool batch_norm, DType dtype) {
  ensure_process_group();
  const int rank = get_rank(), world = get_world_size();
  const std::int64_t share = 64 / world;
  // Different initialisations on purpose: DDP must copy rank 0's.
  auto local = seeded_model(batch_norm, dtype, 7 + static_cast<std::uint64_t>(rank));
  DistributedDataParallel ddp(local, {.bucket_cap_mb = 0.004, .first_bucket_cap_mb = 0.001});
  optim::SGD ddp_opt(ddp.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto reference = seeded_model(batch_norm, dtype, 7);
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 5; ++step) {
    const auto [x, y] = batch_of_64(step, dtype);
    ddp_opt.zero_grad();
    cross_entropy(ddp.forward(x.narrow(0, rank * share, share)), y.narrow(0, rank * share, share)).backward();
    ddp_opt.step();

    ref_opt.zero_grad();
    if (batch_norm) {
      // The other halves first, then rank 0's from the same running statistics: those are
      // the ones DDP keeps (it broadcasts rank 0's buffers at every forward).
      TensorList before;
      for (const Tensor& b : reference->buffers()) before.push_back(b.clone());
      Tensor loss;
      for (int r = world - 1; r >= 0; --r) {
        if (r == 0) {
          NoGradGuard no_grad;
          const TensorList buffers = reference->buffers();
          for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].copy_(before[i]);
        }
        const Tensor part = cross_entropy(reference->forward(x.narrow(0, r * share, share)),
                                          y.narrow(0, r * share, share));
        loss = loss.defined() ? loss + part : part;
      }
      (loss / world).backward();
    } else {
      cross_entropy(reference->forward(x), y).backward();
    }
    ref_opt.step();
  }
  if (batch_norm) {
    // One more forward: every rank now holds rank 0's running statistics.
    NoGradGuard no_grad;
    ddp.eval();
    ddp.forward(batch_of_64(0, dtype).first);
    const auto mine = local->named_buffers();
    const auto expected = reference->named_buffers();
    ASSERT_EQ(mine.size(), 3u);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      EXPECT_TRUE(testing::tensors_near(mine[i].second, expected[i].second, tolerance(dtype)))
          << mine[i].first << " on rank " << rank;
    }
  }
  const auto ddp_params = local->named_parameters();
  const auto ref_params = reference->named_parameters();
  for (std::size_t i = 0; i < ddp_params.size(); ++i) {
    EXPECT_TRUE(testing::tensors_near(ddp_params[i].second, ref_params[i].second, tolerance(dtype)))
        << ddp_params[i].first << " on rank " << rank;
  }
}

TEST(DistributedDataParallel, RanksTimesHalfBatchesEqualOneProcessOnTheWholeBatch) {
  expect_ddp_matches_one_process(false, kFloat64);
  expect_ddp_matches_one_process(false, kFloat32);
}

TEST(DistributedDataParallel, WithBatchNormBuffersToo) {
  expect_ddp_matches_one_process(true, kFloat64);
  expect_ddp_matches_one_process(true, kFloat32);
}

// A compiled DDP step (kiln::compile) replays each bucket's all-reduce as a region that sums and
// waits, and the average's division as the kernel it is: it trains to the eager step's weights
// on every rank, step for step (Float64, small buckets so that there are several).
TEST(DistributedDataParallel, ACompiledStepReducesAsTheEagerStepDoes) {
  ensure_process_group();
  const int rank = get_rank(), world = get_world_size();
  const std::int64_t share = 64 / world;
  auto eager_model = seeded_model(false, kFloat64), compiled_model = seeded_model(false, kFloat64);
  DistributedDataParallel eager(eager_model, {.bucket_cap_mb = 0.002, .first_bucket_cap_mb = 0.001});
  DistributedDataParallel compiled(compiled_model, {.bucket_cap_mb = 0.002, .first_bucket_cap_mb = 0.001});
  optim::SGD eager_opt(eager.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD compiled_opt(compiled.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto step = [](DistributedDataParallel& ddp, optim::SGD& opt, const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor loss = cross_entropy(ddp.forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  auto replayed = kiln::compile([&](const Tensor& x, const Tensor& y) { return step(compiled, compiled_opt, x, y); });
  ASSERT_GT(compiled.bucket_indices().size(), 2u);
  for (int i = 0; i < 5; ++i) {
    const auto [x, y] = batch_of_64(i, kFloat64);
    const Tensor mine = x.narrow(0, rank * share, share), targets = y.narrow(0, rank * share, share);
    const double expected = step(eager, eager_opt, mine, targets).item<double>();
    EXPECT_NEAR(replayed(mine, targets).item<double>(), expected, 1e-12) << "step " << i;
    if (i > 0) {
      EXPECT_TRUE(replayed.last_call_replayed()) << replayed.eager_reason();
    }
    const TensorList a = eager_model->parameters(), b = compiled_model->parameters();
    for (std::size_t p = 0; p < a.size(); ++p) {
      EXPECT_TRUE(kiln::testing::tensors_near(b[p], a[p], 1e-12)) << "step " << i << ", parameter " << p;
    }
  }
  (void)world;
}

TEST(DistributedDataParallel, BucketsLaunchWhileBackwardStillRuns) {
  ensure_process_group();
  auto model = seeded_model(false, kFloat32);
  // fc3 (0.6 KiB) alone fills the 0.5 KiB first bucket; fc2 (4.2 KiB) the next; fc1 the last.
  DistributedDataParallel ddp(model, {.bucket_cap_mb = 0.004, .first_bucket_cap_mb = 0.0005});
  const std::vector<std::vector<std::size_t>> expected_buckets{{5, 4}, {3, 2}, {1, 0}};
  EXPECT_EQ(ddp.bucket_indices(), expected_buckets);
  const auto [x, y] = batch_of_64(0, kFloat32);
  cross_entropy(ddp.forward(x), y).backward();
  const std::vector<DdpEvent> events = ddp.last_events();
  auto position = [&](DdpEvent::Kind kind, std::size_t index) {
    const auto it = std::find_if(events.begin(), events.end(),
                                 [&](const DdpEvent& e) { return e.kind == kind && e.index == index; });
    EXPECT_NE(it, events.end()) << static_cast<int>(kind) << " " << index;
    return it - events.begin();
  };
  using Kind = DdpEvent::Kind;
  ASSERT_EQ(events.size(), 6u + 3u + 1u);  // six gradients, three launches, the end
  // Backward produces fc3's gradients first: its bucket goes before fc1's gradients exist,
  // and fc2's too.
  for (std::size_t fc1 : {0u, 1u}) {
    EXPECT_LT(position(Kind::BucketLaunched, 0), position(Kind::GradientReady, fc1));
    EXPECT_LT(position(Kind::BucketLaunched, 1), position(Kind::GradientReady, fc1));
  }
  EXPECT_GT(position(Kind::BucketLaunched, 0), position(Kind::GradientReady, 4));
  EXPECT_GT(position(Kind::BucketLaunched, 0), position(Kind::GradientReady, 5));
  EXPECT_EQ(events.back().kind, Kind::ReductionFinished);
  const DdpStepStats stats = ddp.last_step_stats();
  EXPECT_EQ(stats.buckets, 3u);
  EXPECT_EQ(stats.bytes_reduced, get_world_size() > 1 ? model->num_parameters() * 4 : 0);
}

TEST(DistributedDataParallel, NoSyncAccumulatesLocallyThenAveragesTheSums) {
  ensure_process_group();
  const int rank = get_rank(), world = get_world_size();
  auto model = seeded_model(false, kFloat64);
  DistributedDataParallel ddp(model);
  const auto [x, y] = batch_of_64(3, kFloat64);
  const std::int64_t share = 64 / world, micro = share / 2;
  auto micro_batch = [&](int r, int m) {
    return std::pair{x.narrow(0, r * share + m * micro, micro), y.narrow(0, r * share + m * micro, micro)};
  };
  {
    auto guard = ddp.no_sync();
    const auto [xa, ya] = micro_batch(rank, 0);
    cross_entropy(ddp.forward(xa), ya).backward();
    EXPECT_TRUE(ddp.last_events().empty());  // nothing communicated
  }
  const auto [xb, yb] = micro_batch(rank, 1);
  cross_entropy(ddp.forward(xb), yb).backward();
  // The reference: every rank's two micro-batch gradients, summed, over the world size.
  auto reference = seeded_model(false, kFloat64);
  for (int r = 0; r < world; ++r) {
    for (int m = 0; m < 2; ++m) {
      const auto [xm, ym] = micro_batch(r, m);
      (cross_entropy(reference->forward(xm), ym) / world).backward();
    }
  }
  const TensorList mine = model->parameters(), expected = reference->parameters();
  for (std::size_t i = 0; i < mine.size(); ++i) {
    EXPECT_TRUE(testing::tensors_near(mine[i].grad(), expected[i].grad(), 1e-12)) << i;
  }
}

/// A model with a layer its forward never uses.
struct WithUnusedLayer : Module {
  std::shared_ptr<Linear> used, unused;
  bool use_both = false;
  WithUnusedLayer() : Module("WithUnusedLayer") {
    used = register_module("used", std::make_shared<Linear>(4, 2));
    unused = register_module("unused", std::make_shared<Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return use_both ? used->forward(x) + unused->forward(x) : used->forward(x); }
};

TEST(DistributedDataParallel, AParameterWithoutGradientIsAnErrorWithPyTorchsAdvice) {
  ensure_process_group();
  manual_seed(0);
  DistributedDataParallel ddp(std::make_shared<WithUnusedLayer>());
  const Tensor x = ones({3, 4});
  ddp.forward(x).sum().backward();  // unused.weight never gets ready: the reduction never ends
  const std::string message = testing::error_of([&] { ddp.forward(x); });
  EXPECT_NE(message.find("Expected to have finished reduction in the prior iteration"), std::string::npos) << message;
  EXPECT_NE(message.find("find_unused_parameters"), std::string::npos) << message;
  EXPECT_NE(message.find("module.unused.weight"), std::string::npos) << message;
}

TEST(DistributedDataParallel, FindUnusedParametersReducesTheRest) {
  ensure_process_group();
  const int world = get_world_size();
  manual_seed(0);
  auto model = std::make_shared<WithUnusedLayer>();
  DistributedDataParallel ddp(model, {.find_unused_parameters = true});
  for (int step = 0; step < 2; ++step) {
    model->zero_grad();
    const Tensor x = full({3, 4}, static_cast<double>(get_rank() + 1));
    ddp.forward(x).sum().backward();
    // d(sum)/d(weight) = column sums of x: 3 (rank + 1), averaged over ranks.
    double mean_input = 0;
    for (int r = 0; r < world; ++r) mean_input += 3.0 * (r + 1) / world;
    EXPECT_TRUE(testing::values_near(model->used->weight.grad(), std::vector<double>(8, mean_input))) << step;
    EXPECT_FALSE(model->unused->weight.grad().defined()) << step;  // no rank used it: left as it was
  }
}

TEST(DistributedDataParallel, ALayerOneRankUsedGetsTheAverageWithTheOthersZeros) {
  ensure_process_group();
  const int rank = get_rank(), world = get_world_size();
  manual_seed(0);
  auto model = std::make_shared<WithUnusedLayer>();
  model->use_both = rank == world - 1;
  DistributedDataParallel ddp(model, {.find_unused_parameters = true});
  ddp.forward(ones({3, 4})).sum().backward();
  // Only the last rank's forward reaches `unused`: its gradient 3 per weight, over the world.
  EXPECT_TRUE(testing::values_near(model->unused->weight.grad(), std::vector<double>(8, 3.0 / world)));
  EXPECT_TRUE(testing::values_near(model->used->weight.grad(), std::vector<double>(8, 3.0)));
}

TEST(DistributedDataParallel, ModelsThatDifferAcrossRanksAreAConstructionError) {
  ensure_process_group();
  if (get_world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int rank = get_rank();
  auto model = std::make_shared<SmallMlp>(false, rank == 1 ? 16 : 32);
  const std::string message = testing::error_of([&] { DistributedDataParallel ddp(model); });
  // Every rank names the same first difference: fc1.weight, [32, 20] on rank 0, [16, 20] on rank 1.
  EXPECT_NE(message.find("DDP expects same model across all ranks"), std::string::npos) << message;
  EXPECT_NE(message.find("'module.fc1.weight'"), std::string::npos) << message;
  EXPECT_NE(message.find("kiln.float32 [32, 20] on rank 0 and kiln.float32 [16, 20] on rank 1"), std::string::npos) << message;
  auto fewer = std::make_shared<SmallMlp>(rank == 1, 32);  // rank 1 has BatchNorm's two more parameters
  const std::string count = testing::error_of([&] { DistributedDataParallel ddp(fewer); });
  EXPECT_NE(count.find("Rank 1 has 8 params, while rank 0 has inconsistent 6 params"), std::string::npos) << count;
}

}  // namespace
}  // namespace kiln::nn
