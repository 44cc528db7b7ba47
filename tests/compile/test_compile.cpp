// tests/compile/test_compile.cpp — a compiled step computes what the eager step computes: two
// copies of a model from one seed train side by side, one eagerly and one through
// kiln::compile, and after every step their losses and every parameter agree (Float64, 20
// steps; the replay makes the same kernel calls, so they agree exactly). Also: the guards
// (a new batch size captures again), steps the capture must refuse (a value read on the host),
// the arena (a replay allocates nothing), and the graph's printed forms.
#include <gtest/gtest.h>

#include <any>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include "../../examples/support/models.h"
#include "autograd/saved_tensors_hooks.h"
#include "compile/capture.h"
#include "compile/passes.h"
#include "core/routes.h"
#include "compiled_training.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::expect_same_training;
using testing::parameter_gap;

/// Eager runs compute the same bits only on a fixed thread count: the default count backs off
/// while the machine is busy, and oneDNN's last bits depend on it (Note [Exact resumption]).
class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(get_num_threads()); }
};

struct SmallCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::Dropout> drop;
  SmallCnn() : Module("SmallCnn") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(4, 8, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.25));
    fc = register_module("fc", std::make_shared<nn::Linear>(8 * 3 * 3, 5));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(conv1->forward(x).relu(), {2, 2});
    h = max_pool2d(conv2->forward(h).relu(), {2, 2});
    return fc->forward(drop->forward(h.flatten(1)));
  }
};

/// A first layer too wide to be thin (3 channels, 5x5: 75 taps a output), so it takes oneDNN's
/// route with no input gradient: its weight gradient is read through its pool in the
/// primitive's own layout (fuse_unpool_weight_gradient).
struct RgbCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Linear> fc;
  RgbCnn() : Module("RgbCnn") {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(3, 16, 5, nn::Conv2dOptions{.padding = {2, 2}}));
    fc = register_module("fc", std::make_shared<nn::Linear>(16 * 5 * 5, 4));
  }
  Tensor forward(const Tensor& x) override {
    return fc->forward(max_pool2d(conv->forward(x).relu(), {2, 2}).flatten(1));
  }
};

struct SmallMlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  SmallMlp() : Module("SmallMlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(12, 16));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(fc1->forward(x).relu()); }
};

TEST_F(CompileTest, AnMlpStepWithSgdMatchesEagerInFloat64) {
  expect_same_training<SmallMlp>({6, 12}, 3, kFloat64, /*adam=*/false, 20, 1e-12);
}

TEST_F(CompileTest, ACnnStepWithDropoutAndAdamMatchesEagerInFloat64) {
  expect_same_training<SmallCnn>({5, 1, 12, 12}, 5, kFloat64, /*adam=*/true, 20, 1e-12);
}

/// Every pass but those that change a reduction's order (whose Notes say so).
const char* kExactPasses =
    "fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,fuse_linear,record_pool_windows,fuse_elementwise_chains,"
    "plan_memory";

TEST_F(CompileTest, TheFashionCnnStepMatchesEagerInFloat32) {
  // train_cnn's model: the oneDNN route, its blocked layouts and thin kernels.
  expect_same_training<examples::Cnn>({8, 1, 28, 28}, 10, kFloat32, /*adam=*/true, 4, 0.0, kExactPasses);
  // With every pass, oneDNN sums conv2's bias gradient in its own order: the last bits move.
  expect_same_training<examples::Cnn>({8, 1, 28, 28}, 10, kFloat32, /*adam=*/true, 4, 1e-5, "all");
}

TEST_F(CompileTest, AWideFirstLayerReadsItsGradientThroughThePoolOnOneDnnsRoute) {
  if (!backends::onednn_is_available()) GTEST_SKIP() << "oneDNN is not built in";
  ASSERT_EQ(routes::cpu_conv2d(kFloat32, {16, 3, 5, 5}, 1), routes::Route::OneDnn);
  // The fused kernel runs the weight primitive of fuse_conv_bias_backward on the same gradient,
  // only made in its layout (the kernels' test checks that bit for bit); the pair's bias sum is
  // oneDNN's order, not eager's, so the step agrees with eager within Float32's rounding.
  expect_same_training<RgbCnn>({6, 3, 10, 10}, 4, kFloat32, /*adam=*/false, 4, 1e-6,
                               "fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,fuse_conv_bias_backward,"
                               "fuse_unpool_weight_gradient");
  std::vector<std::int64_t> reorders;
  for (const char* passes : {"fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,fuse_conv_bias_backward",
                             "fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,fuse_conv_bias_backward,"
                             "fuse_unpool_weight_gradient"}) {
    testing::Trainer<RgbCnn> trainer(3, kFloat32, false);
    auto step = compile([&](const Tensor& x, const Tensor& y) { return trainer.step(x, y); }, {.passes = passes});
    manual_seed(2);
    const Tensor x = randn({6, 3, 10, 10}), y = randint(0, 4, {6});
    step(x, y);
    const std::int64_t before = backends::onednn_stats().reorders;
    step(x, y);
    reorders.push_back(backends::onednn_stats().reorders - before);
    const bool fused = std::string(passes).ends_with("fuse_unpool_weight_gradient");
    EXPECT_EQ(step.graph().count(compiler::KernelFamily::ConvBackwardWeightBiasThroughMaxPool), fused ? 1u : 0u);
    EXPECT_EQ(step.graph().count(compiler::KernelFamily::MaxPoolBackwardRelu), fused ? 0u : 1u);
  }
  EXPECT_EQ(reorders[1], reorders[0] - 1) << "the gradient is no longer reordered into the weight primitive's layout";
}

TEST_F(CompileTest, ANanInALayerReachesTheLossAsItDoesEagerly) {
  // A dead layer must show: with one NaN weight in conv2 (oneDNN's route) or in fc1, every
  // fusion keeps the NaN through relu and pooling into the loss (Note [oneDNN's relu drops NaN]).
  for (const char* layer : {"conv2.weight", "fc1.weight"}) {
    testing::Trainer<examples::Cnn> trainer(3, kFloat32, false);
    for (const auto& [name, parameter] : trainer.model->named_parameters()) {
      NoGradGuard no_grad;
      if (name == layer) parameter.view({-1}).narrow(0, 0, 1).fill_(std::nan(""));
    }
    auto step = compile([&](const Tensor& x, const Tensor& y) { return trainer.step(x, y); });
    manual_seed(5);
    const Tensor x = rand({8, 1, 28, 28}), y = randint(0, 10, {8});
    EXPECT_TRUE(std::isnan(trainer.step(x, y).item<double>())) << layer << ", eager";
    step(x, y);
    EXPECT_TRUE(std::isnan(step(x, y).item<double>())) << layer << ", replayed";
    EXPECT_TRUE(step.last_call_replayed()) << layer;
  }
}

TEST_F(CompileTest, FreezingAParameterCapturesAgain) {
  // requires_grad_(false) on a parameter after the capture changes which gradients the step
  // computes: the next call must capture again, and the frozen layer must stay as it is.
  testing::Trainer<SmallMlp> eager(2, kFloat64, false), compiled(2, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  manual_seed(5);
  Tensor frozen_weight;
  for (int i = 0; i < 5; ++i) {
    if (i == 2) {
      for (testing::Trainer<SmallMlp>* t : {&eager, &compiled}) {
        t->model->fc1->weight.requires_grad_(false);
        t->model->fc1->bias.requires_grad_(false);
      }
      frozen_weight = compiled.model->fc1->weight.clone();
    }
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    EXPECT_NEAR(step(x, y).item<double>(), eager.step(x, y).item<double>(), 1e-12) << "step " << i;
    ASSERT_LE(parameter_gap(*eager.model, *compiled.model), 1e-12) << "step " << i;
  }
  EXPECT_EQ(step.stats().captures, 2);
  EXPECT_TRUE(equal(compiled.model->fc1->weight, frozen_weight));
}

TEST_F(CompileTest, AModelMovedToAnotherDtypeCapturesAgain) {
  // model.to(kFloat64) replaces every parameter (Note [Moving parameters]); a replay would go on
  // training the Float32 tensors the graph holds while the model's own stayed as they were.
  testing::Trainer<SmallMlp> run(2, kFloat32, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return run.step(x, y); });
  const Tensor x = randn({6, 12}), y = randint(0, 3, {6});
  step(x, y);
  step(x, y);
  run.model->to(kFloat64);
  const Tensor moved = run.model->fc1->weight.clone();
  // The same Float32 batch now meets Float64 weights: the eager error, not a replay.
  EXPECT_THROW(step(x, y), TypeError);
  EXPECT_TRUE(equal(run.model->fc1->weight, moved));
  step(x.to(kFloat64), y);
  EXPECT_FALSE(equal(run.model->fc1->weight, moved));
  EXPECT_EQ(step.stats().captures, 2);  // the call that threw recorded nothing
}

TEST_F(CompileTest, TheLibraryRouteAndAnomalyDetectionAreGuarded) {
  // Switched after the capture, each would be ignored by a replay: the oneDNN calls made on
  // the Eigen route asked for, the NaN checks of anomaly detection skipped.
  testing::Trainer<SmallCnn> eager(4, kFloat64, false), compiled(4, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  const auto both = [&](const Tensor& x, const Tensor& y) {
    const Tensor stream = get_rng_state();
    const double expected = eager.step(x, y).item<double>();
    set_rng_state(stream);
    EXPECT_NEAR(step(x, y).item<double>(), expected, 1e-12);
    EXPECT_LE(parameter_gap(*eager.model, *compiled.model), 1e-12);
  };
  const Tensor x = randn({4, 1, 12, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 5, {4});
  both(x, y);
  both(x, y);
  {
    backends::OpKernelsGuard reference_route(DeviceType::CPU, false);
    both(x, y);
    EXPECT_EQ(step.stats().captures, 2);
  }
  both(x, y);
  EXPECT_TRUE(step.last_call_replayed());
  EXPECT_EQ(step.stats().captures, 2);

  const WarningHandler previous = set_warning_handler([](const std::string&) {});
  autograd::DetectAnomalyGuard anomaly;
  Tensor poisoned = x.clone();
  poisoned.select(0, 0).fill_(std::nan(""));
  try {
    step(poisoned, y);
    ADD_FAILURE() << "a NaN gradient went past anomaly detection";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("returned nan values"), std::string::npos) << e.what();
  }
  set_warning_handler(previous);
  EXPECT_FALSE(step.last_call_replayed());
}

TEST_F(CompileTest, SavedTensorsHooksRunEagerlyAndTheirAbsenceReplays) {
  // pack and unpack are host code: replayed as kernels, a count or a list of offloaded tensors
  // kept by the hooks would silently stop changing.
  testing::Trainer<SmallMlp> eager(2, kFloat64, false), compiled(2, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  int packed = 0;
  std::vector<bool> replayed;
  for (int i = 0; i < 6; ++i) {
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    const double expected = eager.step(x, y).item<double>();
    std::optional<autograd::SavedTensorsHooksGuard> hooks;
    if (i == 2 || i == 3) {
      hooks.emplace(autograd::SavedTensorsHooks{
          .pack = [&packed](const Tensor& t) { return std::any((++packed, t)); },
          .unpack = [](const std::any& p) { return std::any_cast<Tensor>(p); }});
    }
    EXPECT_NEAR(step(x, y).item<double>(), expected, 1e-12) << "step " << i;
    replayed.push_back(step.last_call_replayed());
  }
  set_warning_handler(previous);
  EXPECT_EQ(replayed, (std::vector<bool>{false, true, false, false, true, true}));
  EXPECT_GT(packed, 0);
  EXPECT_EQ(packed % 2, 0);  // both hooked steps packed, the same tensors each
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("a saved-tensors hook"), std::string::npos) << warnings[0];
  EXPECT_LE(parameter_gap(*eager.model, *compiled.model), 1e-12);
}

TEST_F(CompileTest, AGradientHookOnAParameterAddedOrRemovedCapturesAgain) {
  // A hook that clips a parameter's gradient, registered after the capture and removed later:
  // each change must reach the next step, as it does eagerly.
  testing::Trainer<SmallMlp> eager(2, kFloat64, false), compiled(2, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  const auto clip = [](const Tensor& g) { return g.clamp(-1e-3, 1e-3); };
  HookHandle eager_hook, compiled_hook;
  for (int i = 0; i < 6; ++i) {
    if (i == 2) {
      eager_hook = eager.model->fc1->weight.register_hook(clip);
      compiled_hook = compiled.model->fc1->weight.register_hook(clip);
    }
    if (i == 4) {
      eager_hook.remove();
      compiled_hook.remove();
    }
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    EXPECT_NEAR(step(x, y).item<double>(), eager.step(x, y).item<double>(), 1e-12) << "step " << i;
    ASSERT_LE(parameter_gap(*eager.model, *compiled.model), 1e-12) << "step " << i;
  }
  EXPECT_EQ(step.stats().captures, 3);
  EXPECT_EQ(step.stats().replays, 3);
}

struct NormDropMlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::BatchNorm1d> norm;
  std::shared_ptr<nn::Dropout> drop;
  NormDropMlp() : Module("NormDropMlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(12, 16));
    norm = register_module("norm", std::make_shared<nn::BatchNorm1d>(16));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
  }
  Tensor forward(const Tensor& x) override {
    return fc2->forward(drop->forward(norm->forward(fc1->forward(x)).relu()));
  }
};

TEST_F(CompileTest, EvalModeCapturesAGraphOfItsOwnAndTrainModeReplaysTheFirst) {
  // A graph captured in training mode drops units and moves BatchNorm's running statistics;
  // after model.eval() it must not be replayed (Note [What a graph assumed of its modules]).
  // Training in eval mode is a real recipe: fine-tuning with the statistics frozen.
  testing::Trainer<NormDropMlp> eager(3, kFloat64, false), compiled(3, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  manual_seed(6);
  const std::vector<bool> training{true, true, false, false, true, true, false};
  for (std::size_t i = 0; i < training.size(); ++i) {
    eager.model->train(training[i]);
    compiled.model->train(training[i]);
    const Tensor x = randn({8, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {8});
    const Tensor stream = get_rng_state();
    const double eager_loss = eager.step(x, y).item<double>();
    set_rng_state(stream);
    EXPECT_NEAR(step(x, y).item<double>(), eager_loss, 1e-12) << "step " << i;
    ASSERT_LE(parameter_gap(*eager.model, *compiled.model), 1e-12) << "step " << i;
    EXPECT_TRUE(equal(compiled.model->norm->running_mean, eager.model->norm->running_mean)) << "step " << i;
  }
  EXPECT_EQ(step.stats().captures, 2);  // one graph per mode, each replayed on its return
  EXPECT_EQ(step.stats().replays, 5);
  // A model destroyed since its capture fails that graph's conditions: the step captures again.
  auto forward = [](const std::shared_ptr<NormDropMlp>& m) {
    return compile([m = std::weak_ptr<NormDropMlp>(m)](const Tensor& x) {
      NoGradGuard no_grad;
      if (const std::shared_ptr<NormDropMlp> model = m.lock()) return model->forward(x);
      return x.sum({1}, true);
    });
  };
  auto model = std::make_shared<NormDropMlp>();
  model->eval();
  auto compiled_forward = forward(model);
  const Tensor x = randn({8, 12});
  compiled_forward(x);
  model.reset();
  EXPECT_EQ(compiled_forward(x).sizes(), (Shape{8, 1}));
  EXPECT_EQ(compiled_forward.stats().captures, 2);
}

TEST_F(CompileTest, AReplayAllocatesNothing) {
  testing::Trainer<SmallCnn> run(3, kFloat32, true);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return run.step(x, y); });
  const Tensor x = randn({4, 1, 12, 12}), y = randint(0, 5, {4});
  step(x, y);  // captures
  step(x, y);  // replays once: the optimizer's state exists now
  const std::int64_t before = cpu_allocator_stats().allocations;
  for (int i = 0; i < 3; ++i) step(x, y);
  EXPECT_EQ(cpu_allocator_stats().allocations - before, 0);
  EXPECT_GT(step.graph().memory.temporaries, 10);
  EXPECT_LT(step.graph().memory.bytes, step.graph().memory.temporary_bytes);  // lifetimes share the arena
}

TEST_F(CompileTest, AnElementwiseResultIsWrittenOverItsDyingInputOnly) {
  // Each of x·2, relu, + 1 and exp reads a temporary no later call reads, so all four share one
  // range of the arena (Note [An elementwise result written over its dying input]); in the
  // second step x·2 is read again at the end, so relu's result must not take its place.
  const auto chain = [](const Tensor& x) { return ((x * 2.0).relu() + 1.0).exp().sum(); };
  const auto reread = [](const Tensor& x) {
    const Tensor doubled = x * 2.0;
    const Tensor activated = (doubled.relu() + 1.0).exp().sum();
    return activated + doubled.sum();
  };
  manual_seed(8);
  const Tensor x = randn({64, 96});
  const std::int64_t bytes = x.numel() * 4;
  auto shared = compile(chain, {.passes = "plan_memory"});
  auto kept = compile(reread, {.passes = "plan_memory"});
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(testing::same_bytes(shared(x), chain(x)));
    EXPECT_TRUE(testing::same_bytes(kept(x), reread(x)));
  }
  const auto first_range = [&](const compiler::Graph& g, std::size_t k) {
    std::size_t seen = 0;
    for (const compiler::Node& node : g.nodes) {
      if (node.kind == compiler::Node::Kind::Kernel && seen++ == k) {
        return static_cast<const void*>(std::as_const(*node.call).tensors()[0]->raw_data_ptr());
      }
    }
    return static_cast<const void*>(nullptr);
  };
  const compiler::Graph& g = shared.graph();
  // Four temporaries of `bytes` each (and the sum's few bytes) in one range.
  EXPECT_GE(g.memory.temporary_bytes, 4 * bytes);
  EXPECT_LT(g.memory.bytes, bytes + 1024);
  EXPECT_EQ(first_range(g, 0), first_range(g, 3));  // exp's output over the product's
  const compiler::Graph& k = kept.graph();
  EXPECT_NE(first_range(k, 0), first_range(k, 1));  // relu's output beside the product it must keep
}

TEST_F(CompileTest, AGradientIsBoundWithoutACopyAsEagerCodeBindsIt) {
  // AccumulateGrad takes a gradient without copying it when nothing else holds it. The capture
  // must not be that something else (compile/kernel_call.h keeps its own handles), or the graph
  // replays a clone the eager step never makes: for every leaf's gradient, no copy writes it.
  testing::Trainer<SmallCnn> run(3, kFloat32, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return run.step(x, y); }, {.passes = "none"});
  step(randn({4, 1, 12, 12}), randint(0, 5, {4}));
  std::set<const Storage*> bound;
  for (const compiler::Node& node : step.graph().nodes) {
    if (node.kind == compiler::Node::Kind::BindGrad) bound.insert(node.grad.impl()->storage().get());
  }
  EXPECT_EQ(bound.size(), run.model->parameters().size());
  for (const compiler::Node& node : step.graph().nodes) {
    if (node.kind != compiler::Node::Kind::Kernel || node.call->id().family != compiler::KernelFamily::Copy) continue;
    const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();  // (out, in)
    EXPECT_EQ(bound.count(args[0]->impl()->storage().get()), 0u) << "a gradient copied before it is bound";
  }
}

TEST_F(CompileTest, ANewBatchSizeCapturesAgainAndTheOldGraphStays) {
  testing::Trainer<SmallMlp> run(1, kFloat32, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return run.step(x, y); });
  step(randn({6, 12}), randint(0, 3, {6}));
  step(randn({6, 12}), randint(0, 3, {6}));
  step(randn({2, 12}), randint(0, 3, {2}));  // the last batch of an epoch
  step(randn({6, 12}), randint(0, 3, {6}));
  EXPECT_EQ(step.stats().captures, 2);
  EXPECT_EQ(step.stats().replays, 2);
  // The thread count is guarded too (oneDNN's last bits depend on it).
  const int threads = get_num_threads();
  set_num_threads(threads == 1 ? 2 : 1);
  step(randn({6, 12}), randint(0, 3, {6}));
  set_num_threads(threads);
  EXPECT_EQ(step.stats().captures, 3);
}

TEST_F(CompileTest, ResultsKeptFromEarlierStepsKeepTheirValues) {
  testing::Trainer<SmallMlp> eager(3, kFloat64, false), compiled(3, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) {
    Tensor loss = compiled.step(x, y);
    return TensorList{loss, loss.view({1}), compiled.model->fc2->bias};
  });
  manual_seed(5);
  std::vector<Tensor> eager_losses, compiled_losses, loss_views;
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    eager_losses.push_back(eager.step(x, y).detach());
    const TensorList results = step(x, y);
    compiled_losses.push_back(results[0]);
    loss_views.push_back(results[1]);
    // A parameter the step returns is the live parameter's memory, as eagerly.
    EXPECT_EQ(results[2].impl()->data(), compiled.model->fc2->bias.impl()->data());
  }
  EXPECT_EQ(step.stats().replays, 3);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(compiled_losses[i].item<double>(), eager_losses[i].item<double>()) << "step " << i;
    EXPECT_EQ(loss_views[i].item<double>(), eager_losses[i].item<double>()) << "step " << i;
  }
  // Only a result the caller holds is copied out: a loop that lets the loss go allocates nothing.
  const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
  step(x, y);
  const std::int64_t before = cpu_allocator_stats().allocations;
  for (int i = 0; i < 3; ++i) step(x, y);
  EXPECT_EQ(cpu_allocator_stats().allocations - before, 0);
  // A result outlives its graph.
  const Tensor last = step(x, y)[0];
  const double value = last.item<double>();
  step.reset();
  EXPECT_EQ(last.item<double>(), value);
}

TEST_F(CompileTest, AnInputTheStepWritesInPlaceIsWrittenForTheCaller) {
  auto step = compile([](const Tensor& x) {
    NoGradGuard no_grad;
    x.mul_(2.0);
    return TensorList{x.sum(), x};
  });
  std::vector<Tensor> returned;
  for (int i = 0; i < 3; ++i) {
    const Tensor x = full({3}, 1.5 + i);
    const TensorList results = step(x);
    EXPECT_EQ(results[0].item<double>(), 6.0 * (1.5 + i));
    EXPECT_EQ(x.sum().item<double>(), 6.0 * (1.5 + i)) << "call " << i;
    returned.push_back(results[1]);
  }
  EXPECT_EQ(step.stats().replays, 2);
  // The input a step returns is refilled by each replay: one kept keeps its value.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(returned[i].sum().item<double>(), 6.0 * (1.5 + i)) << "call " << i;
}

TEST_F(CompileTest, ATensorReadFromOutsideThatIsReplacedCapturesAgain) {
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  Tensor weight = full({3}, 2.0);
  auto step = compile([&](const Tensor& x) { return (x * weight).sum(); });
  const Tensor x = ones({3});
  EXPECT_EQ(step(x).item<double>(), 6.0);
  weight.copy_(full({3}, 3.0));  // new values in the same tensor: read where it lies
  EXPECT_EQ(step(x).item<double>(), 9.0);
  EXPECT_TRUE(step.last_call_replayed());
  weight = full({3}, 4.0);  // a new tensor, the old one let go
  EXPECT_EQ(step(x).item<double>(), 12.0);
  EXPECT_FALSE(step.last_call_replayed());
  EXPECT_EQ(step(x).item<double>(), 12.0);
  EXPECT_TRUE(step.last_call_replayed());
  EXPECT_EQ(step.stats().captures, 2);

  // The batch a training loop assigns to a variable its step's lambda reads: each step reads
  // the new batch, as eagerly, never the first one again.
  testing::Trainer<SmallMlp> eager(4, kFloat64, false), compiled(4, kFloat64, false);
  Tensor batch_x, batch_y;
  auto train = compile([&]() { return compiled.step(batch_x, batch_y); });
  manual_seed(8);
  for (int i = 0; i < 3; ++i) {
    batch_x = randn({6, 12}, TensorOptions().dtype(kFloat64));
    batch_y = randint(0, 3, {6});
    EXPECT_EQ(train().item<double>(), eager.step(batch_x, batch_y).item<double>()) << "step " << i;
  }
  EXPECT_EQ(parameter_gap(*eager.model, *compiled.model), 0.0);
  set_warning_handler(previous);
  ASSERT_EQ(warnings.size(), 2u);  // once per compiled step
  EXPECT_NE(warnings[0].find("a tensor it reads from outside (float32[3])"), std::string::npos) << warnings[0];
}

TEST_F(CompileTest, ATensorTheStepMadeAndKeptOutsideRunsEagerly) {
  // Truncated backpropagation through time, the state kept in a variable the step assigns:
  // a replay would not assign it, so the step runs eagerly (Note [Tensors a step reads from
  // outside]) and every call matches the eager one.
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  const TensorOptions f64 = TensorOptions().dtype(kFloat64);
  manual_seed(13);
  nn::LSTM eager_lstm(4, 5), compiled_lstm(4, 5);
  eager_lstm.to(kFloat64);
  compiled_lstm.to(kFloat64);
  compiled_lstm.load_state_dict(eager_lstm.state_dict());
  std::optional<nn::LSTM::State> eager_state, compiled_state;
  const auto carry = [](nn::LSTM& lstm, std::optional<nn::LSTM::State>& state, const Tensor& x) {
    auto [out, next] = lstm.forward(x, state);
    state = nn::LSTM::State{std::get<0>(next).detach(), std::get<1>(next).detach()};
    return out.sum();
  };
  auto step = compile([&](const Tensor& x) { return carry(compiled_lstm, compiled_state, x); });
  manual_seed(14);
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({3, 2, 4}, f64);
    EXPECT_EQ(step(x).item<double>(), carry(eager_lstm, eager_state, x).item<double>()) << "call " << i;
  }
  EXPECT_EQ(step.stats().replays, 0);
  EXPECT_NE(step.eager_reason().find("made a tensor (float64[1, 2, 5]"), std::string::npos) << step.eager_reason();
  // The state passed in and returned replays, and matches.
  auto passing = compile([&](const Tensor& x, const Tensor& h, const Tensor& c) {
    auto [out, next] = compiled_lstm.forward(x, nn::LSTM::State{h, c});
    return TensorList{out.sum(), std::get<0>(next).detach(), std::get<1>(next).detach()};
  });
  TensorList state{Tensor(), zeros({1, 2, 5}, f64), zeros({1, 2, 5}, f64)};
  eager_state = nn::LSTM::State{zeros({1, 2, 5}, f64), zeros({1, 2, 5}, f64)};
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({3, 2, 4}, f64);
    state = passing(x, state[1], state[2]);
    EXPECT_EQ(state[0].item<double>(), carry(eager_lstm, eager_state, x).item<double>()) << "call " << i;
  }
  EXPECT_EQ(passing.stats().replays, 3);
  // Writing into a tensor from outside is no tensor made: it replays.
  const Tensor last = zeros({3});
  auto writing = compile([&](const Tensor& x) {
    NoGradGuard no_grad;
    last.copy_(x * 2.0);
  });
  for (int i = 0; i < 3; ++i) writing(full({3}, 1.0 + i));
  EXPECT_EQ(writing.stats().replays, 2);
  EXPECT_TRUE(equal(last, full({3}, 6.0)));
  set_warning_handler(previous);
  EXPECT_EQ(warnings.size(), 1u);
}

TEST_F(CompileTest, GradientsAccumulatedOverCallsAddUpAsEagerly) {
  // Gradient accumulation: a compiled forward and backward called three times, then the
  // optimizer's step and zero_grad outside it (Note [A gradient bound or added to]).
  testing::Trainer<SmallMlp> eager(5, kFloat64, false), compiled(5, kFloat64, false);
  auto forward_backward = [](testing::Trainer<SmallMlp>& t, const Tensor& x, const Tensor& y) {
    Tensor loss = cross_entropy(t.model->forward(x), y) / 3.0;
    loss.backward();
    return loss;
  };
  auto micro_step = compile([&](const Tensor& x, const Tensor& y) { return forward_backward(compiled, x, y); });
  manual_seed(9);
  for (int step = 0; step < 3; ++step) {
    for (int micro = 0; micro < 3; ++micro) {
      const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
      EXPECT_EQ(micro_step(x, y).item<double>(), forward_backward(eager, x, y).item<double>());
    }
    const TensorList ge = eager.model->parameters(), gc = compiled.model->parameters();
    for (std::size_t i = 0; i < ge.size(); ++i) EXPECT_TRUE(equal(gc[i].grad(), ge[i].grad())) << "step " << step;
    for (testing::Trainer<SmallMlp>* t : {&eager, &compiled}) {
      t->opt->step();
      t->opt->zero_grad();
    }
  }
  EXPECT_EQ(parameter_gap(*eager.model, *compiled.model), 0.0);
  EXPECT_EQ(micro_step.stats().captures, 2);  // one graph binds the first gradient, one adds
  // A step with zero_grad inside holds whatever the gradients held when called: one graph.
  auto whole_step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  for (int i = 0; i < 3; ++i) whole_step(randn({6, 12}, TensorOptions().dtype(kFloat64)), randint(0, 3, {6}));
  EXPECT_EQ(whole_step.stats().captures, 1);
}

TEST_F(CompileTest, ASeedSetInsideTheStepIsSetAgainByEachReplay) {
  auto step = compile([](const Tensor& x) {
    manual_seed(7);
    return dropout(x, 0.5, true);
  });
  const Tensor x = ones({64});
  manual_seed(7);
  const Tensor expected = dropout(x, 0.5, true);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(equal(step(x), expected)) << "call " << i;
  EXPECT_EQ(step.stats().replays, 2);
  // Reading or restoring the generator's state inside a step keeps it eager.
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  auto restoring = compile([](const Tensor& input) {
    const Tensor state = get_rng_state();
    Tensor y = dropout(input, 0.5, true);
    set_rng_state(state);
    return y;
  });
  const Tensor first = restoring(x);
  EXPECT_TRUE(equal(restoring(x), first));
  set_warning_handler(previous);
  EXPECT_EQ(restoring.stats().replays, 0);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("get_rng_state"), std::string::npos) << warnings[0];
}

TEST_F(CompileTest, AScheduleOrAModeSetInsideTheStepIsSetAgainByEachReplay) {
  // A learning-rate schedule stepped inside the step: each replay steps it, as eagerly.
  testing::Trainer<SmallMlp> eager(11, kFloat64, false), compiled(11, kFloat64, false);
  optim::StepLR eager_schedule(*eager.opt, 1, 0.5), compiled_schedule(*compiled.opt, 1, 0.5);
  auto step = compile([&](const Tensor& x, const Tensor& y) {
    Tensor loss = compiled.step(x, y);
    compiled_schedule.step();
    return loss;
  });
  manual_seed(12);
  for (int i = 0; i < 4; ++i) {
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    const double expected = eager.step(x, y).item<double>();
    eager_schedule.step();
    EXPECT_EQ(step(x, y).item<double>(), expected) << "step " << i;
    EXPECT_EQ(compiled_schedule.get_last_lr(), eager_schedule.get_last_lr()) << "step " << i;
  }
  EXPECT_EQ(parameter_gap(*eager.model, *compiled.model), 0.0);
  EXPECT_EQ(step.stats().replays, 3);
  // eval() inside the step: the mode the step sets is no condition of its graph (one graph,
  // not a capture per call), and each replay leaves the module in it, as eagerly.
  SmallCnn model;
  auto evaluate = compile([&](const Tensor& x) {
    model.eval();
    return model.forward(x);
  });
  const Tensor x = randn({2, 1, 12, 12});
  model.eval();
  const Tensor expected = model.forward(x);
  for (int i = 0; i < 3; ++i) {
    model.train();
    EXPECT_TRUE(equal(evaluate(x), expected)) << "call " << i;
    EXPECT_FALSE(model.is_training()) << "call " << i;
    EXPECT_FALSE(model.drop->is_training()) << "call " << i;
  }
  EXPECT_EQ(evaluate.stats().captures, 1);
}

TEST_F(CompileTest, AStepCalledInsideAnotherIsPartOfItsGraph) {
  // A compiled function called from a compiled step: its ops are recorded in the step's graph,
  // whether it had replayed on its own before or is compiled right there.
  auto inner = compile([](const Tensor& x) { return x * 2.0 + 1.0; });
  inner(ones({3}));
  inner(ones({3}));
  EXPECT_TRUE(inner.last_call_replayed());
  auto outer = compile([&](const Tensor& x) {
    auto fresh = compile([](const Tensor& y) { return y * 3.0; });
    return (inner(x) + fresh(x)).sum();
  });
  for (int i = 0; i < 3; ++i) {
    const Tensor x = full({3}, 1.0 + i);
    EXPECT_EQ(outer(x).item<double>(), ((x * 2.0 + 1.0) + x * 3.0).sum().item<double>()) << "call " << i;
  }
  EXPECT_EQ(outer.stats().replays, 2);
  EXPECT_EQ(outer.eager_reason(), "");
}

TEST_F(CompileTest, TheDefaultDtypeIsGuarded) {
  auto step = compile([](const Tensor& x) { return x * 0.5; });
  const Tensor x = arange(4);
  EXPECT_EQ(step(x).dtype(), kFloat32);
  EXPECT_EQ(step(x).dtype(), kFloat32);
  set_default_dtype(kFloat64);
  const DType seen = step(x).dtype();
  set_default_dtype(kFloat32);
  EXPECT_EQ(seen, kFloat64);
  EXPECT_EQ(step.stats().captures, 2);
}

TEST_F(CompileTest, InputsOverTheSameMemoryShareItInTheGraph) {
  // One tensor passed as two arguments, and two overlapping views of one tensor: a write
  // through one argument is seen through the other, as eagerly, on every call.
  const auto step_fn = [](const Tensor& a, const Tensor& b) {
    NoGradGuard no_grad;
    a.mul_(3.0);
    return b * 2.0;
  };
  auto step = compile(step_fn);
  const TensorOptions f64 = TensorOptions().dtype(kFloat64);
  const Tensor xe = arange(4, f64), xc = arange(4, f64);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(equal(step(xc, xc), step_fn(xe, xe))) << "call " << i;
    EXPECT_TRUE(equal(xc, xe)) << "call " << i;
  }
  EXPECT_EQ(step.stats().captures, 1);
  const Tensor se = arange(6, f64), sc = arange(6, f64);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(equal(step(sc.narrow(0, 0, 4), sc.narrow(0, 2, 4)), step_fn(se.narrow(0, 0, 4), se.narrow(0, 2, 4))))
        << "call " << i;
    EXPECT_TRUE(equal(sc, se)) << "call " << i;
  }
  EXPECT_EQ(step.stats().captures, 2);
  // Which arguments share memory is guarded: two separate tensors are a kind of call of their own.
  const Tensor ye = arange(4, f64), yc = arange(4, f64);
  EXPECT_TRUE(equal(step(xc, yc), step_fn(xe, ye)));
  EXPECT_TRUE(equal(step(xc, xc), step_fn(xe, xe)));
  EXPECT_TRUE(equal(xc, xe));
  EXPECT_EQ(step.stats().captures, 3);
  EXPECT_EQ(step.stats().replays, 5);
}

TEST_F(CompileTest, AnInputsGradientReachesTheCallersTensor) {
  // The FGSM pattern: the gradient of the loss with respect to the input, read after the
  // step and inside it.
  testing::Trainer<SmallMlp> eager(6, kFloat64, false), compiled(6, kFloat64, false);
  const auto attack = [](testing::Trainer<SmallMlp>& t, const Tensor& x, const Tensor& y) {
    t.model->zero_grad();
    cross_entropy(t.model->forward(x), y).backward();
    return x.detach() + 0.1 * x.grad().sign();
  };
  auto step = compile([&](const Tensor& x, const Tensor& y) { return attack(compiled, x, y); });
  manual_seed(10);
  std::vector<Tensor> eager_grads, compiled_grads;
  for (int i = 0; i < 3; ++i) {
    const Tensor data = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    const Tensor xe = data.clone().requires_grad_(true), xc = data.clone().requires_grad_(true);
    EXPECT_TRUE(equal(step(xc, y), attack(eager, xe, y))) << "call " << i;
    ASSERT_TRUE(xc.grad().defined()) << "call " << i;
    eager_grads.push_back(xe.grad());
    compiled_grads.push_back(xc.grad());
  }
  EXPECT_EQ(step.stats().replays, 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(equal(compiled_grads[i], eager_grads[i])) << "call " << i;
  // An input used again without zeroing its gradient accumulates into the caller's tensor,
  // and the step reads the sum.
  const auto square = [](const Tensor& x) {
    (x * x).sum().backward();
    return x.grad() * 1.0;
  };
  auto accumulate = compile(square);
  const Tensor xe = arange(3, TensorOptions().dtype(kFloat64)).requires_grad_(true);
  const Tensor xc = arange(3, TensorOptions().dtype(kFloat64)).requires_grad_(true);
  accumulate(xc);
  const Tensor first_grad = xc.grad();
  square(xe);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(equal(accumulate(xc), square(xe))) << "call " << i;
    EXPECT_TRUE(equal(xc.grad(), xe.grad())) << "call " << i;
  }
  EXPECT_TRUE(xc.grad().is_same(first_grad));  // added to in place, as eagerly
  EXPECT_EQ(accumulate.stats().replays, 2);     // one graph binds the first gradient, one adds
  // Batch after batch, each accumulated over two calls: the same two graphs.
  for (int i = 0; i < 3; ++i) {
    const Tensor ae = full({3}, 0.5 + i, TensorOptions().dtype(kFloat64)).requires_grad_(true);
    const Tensor ac = full({3}, 0.5 + i, TensorOptions().dtype(kFloat64)).requires_grad_(true);
    for (int k = 0; k < 2; ++k) EXPECT_TRUE(equal(accumulate(ac), square(ae))) << "batch " << i;
  }
  EXPECT_EQ(accumulate.stats().captures, 2);
  // One leaf passed twice is one leaf: its gradient is the sum of both uses', as eagerly.
  const auto product = [](const Tensor& a, const Tensor& b) { (a * b).sum().backward(); };
  auto twice = compile(product);
  for (int i = 0; i < 2; ++i) {
    const Tensor we = full({3}, 1.5 + i, TensorOptions().dtype(kFloat64)).requires_grad_(true);
    const Tensor wc = full({3}, 1.5 + i, TensorOptions().dtype(kFloat64)).requires_grad_(true);
    twice(wc, wc);
    product(we, we);
    EXPECT_TRUE(equal(wc.grad(), we.grad())) << "call " << i;
  }
  EXPECT_EQ(twice.stats().replays, 1);
}

TEST_F(CompileTest, AnInputWhoseGradientGoesOutsideTheStepRunsEagerly) {
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  const auto square = [](const Tensor& x) {
    Tensor loss = (x * x).sum();
    loss.backward();
    return loss;
  };
  auto step = compile(square);
  // A non-leaf input: the step's backward goes on into the graph that made it.
  const Tensor w = arange(3, TensorOptions().dtype(kFloat64)).requires_grad_(true);
  for (int i = 0; i < 2; ++i) step(w * 2.0);
  EXPECT_TRUE(equal(w.grad(), w.detach() * 16.0));
  EXPECT_NE(step.eager_reason().find("is not a leaf"), std::string::npos) << step.eager_reason();
  // A hook on an input's gradient runs, as eagerly.
  int hook_calls = 0;
  const Tensor x = arange(3, TensorOptions().dtype(kFloat64)).requires_grad_(true);
  x.register_hook([&](const Tensor&) {
    ++hook_calls;
    return Tensor();
  });
  for (int i = 0; i < 2; ++i) step(x);
  EXPECT_EQ(hook_calls, 2);
  EXPECT_TRUE(equal(x.grad(), x.detach() * 4.0));
  EXPECT_NE(step.eager_reason().find("hook"), std::string::npos) << step.eager_reason();
  // A leaf without hooks replays.
  for (int i = 0; i < 2; ++i) {
    const Tensor z = arange(3, TensorOptions().dtype(kFloat64)).requires_grad_(true);
    step(z);
    EXPECT_TRUE(equal(z.grad(), z.detach() * 2.0));
  }
  EXPECT_TRUE(step.last_call_replayed());
  set_warning_handler(previous);
  ASSERT_EQ(warnings.size(), 3u);  // the hooked leaf twice: its .grad empty, then there to add to
  EXPECT_NE(warnings[0].find("input 0 requires grad and is not a leaf"), std::string::npos) << warnings[0];
}

// A step that reaches the memory of an argument directly too (through the module, the optimizer
// or its closure) computes, eagerly, on one tensor; a replay would compute on the argument's
// copy (Note [A step's inputs]). Each such call runs eagerly and gives eager's results.
TEST_F(CompileTest, AnArgumentOverMemoryTheStepReachesDirectlyRunsEagerly) {
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  struct Model {
    std::shared_ptr<nn::Linear> linear;
    std::unique_ptr<optim::SGD> sgd;
    Model() {
      manual_seed(3);
      linear = std::make_shared<nn::Linear>(3, 2);
      linear->to(kFloat64);
      sgd = std::make_unique<optim::SGD>(linear->parameters(), optim::SGDOptions(0.1));
    }
    // A regularizer on an argument, and the argument's sum read after the optimizer's update.
    Tensor step(const Tensor& x, const Tensor& w) {
      Tensor loss = linear->forward(x).sum() + (w * w).sum();
      loss.backward();
      sgd->step();
      sgd->zero_grad();
      return w.sum();
    }
  };
  Model eager, compiled;
  auto step = compile([&](const Tensor& x, const Tensor& w) { return compiled.step(x, w); });
  const Tensor x = rand({4, 3}, TensorOptions().dtype(kFloat64));
  const Tensor other = rand({2, 3}, TensorOptions().dtype(kFloat64));
  const auto same_step = [&](const Tensor& eager_w, const Tensor& compiled_w) {
    const Tensor expected = eager.step(x, eager_w), result = step(x, compiled_w);
    EXPECT_TRUE(equal(result, expected)) << to_string(result) << " vs " << to_string(expected);
    EXPECT_TRUE(equal(compiled.linear->weight, eager.linear->weight));
  };
  // The parameter itself: known by its name before anything runs.
  for (int i = 0; i < 2; ++i) same_step(eager.linear->weight, compiled.linear->weight);
  EXPECT_FALSE(step.last_call_replayed());
  EXPECT_NE(step.eager_reason().find("is the parameter weight itself"), std::string::npos) << step.eager_reason();
  // Another tensor replays; the parameter's detach() after it is memory the graph reads directly.
  for (int i = 0; i < 2; ++i) same_step(other, other);
  EXPECT_TRUE(step.last_call_replayed());
  for (int i = 0; i < 2; ++i) same_step(eager.linear->weight.detach(), compiled.linear->weight.detach());
  EXPECT_FALSE(step.last_call_replayed());
  EXPECT_NE(step.eager_reason().find("reads directly"), std::string::npos) << step.eager_reason();
  same_step(other, other);
  EXPECT_TRUE(step.last_call_replayed());
  set_warning_handler(previous);
  ASSERT_EQ(warnings.size(), 2u) << warnings.back();  // the parameter, the detach
  EXPECT_NE(warnings[1].find("memory the step's graph reads directly"), std::string::npos) << warnings[1];
}

// Memory reached both ways that no earlier graph of the step reads is met by the capture as the
// step runs: it fails, and says that the capturing call has computed on the copy.
TEST_F(CompileTest, ACaptureThatMeetsAnArgumentsMemoryDirectlyFailsAndSaysSo) {
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  const Tensor table = arange(4, TensorOptions().dtype(kFloat64));
  auto step = compile([&](const Tensor& row) { return row * 2.0 + table.sum(); });
  const Tensor doubled = step(table.detach());
  EXPECT_TRUE(equal(doubled, table * 2.0 + 6.0));  // nothing wrote either copy
  EXPECT_FALSE(step.last_call_replayed());
  step(table.detach());
  EXPECT_FALSE(step.last_call_replayed());
  // Other memory is another call: it captures, and replays.
  const Tensor fresh = arange(4, TensorOptions().dtype(kFloat64));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(equal(step(fresh), fresh * 2.0 + 6.0));
  EXPECT_TRUE(step.last_call_replayed());
  EXPECT_TRUE(equal(step(table.detach()), table * 2.0 + 6.0));
  EXPECT_FALSE(step.last_call_replayed());
  EXPECT_NE(step.eager_reason().find("reaches directly"), std::string::npos) << step.eager_reason();
  set_warning_handler(previous);
  ASSERT_EQ(warnings.size(), 1u);  // said once for that memory
  EXPECT_NE(warnings[0].find("input 0 lies in memory the step also reaches directly"), std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("this call computed on the copy too"), std::string::npos) << warnings[0];
}

/// A training step that calls fc1 and fc2 as modules (operator(), so that their hooks run).
Tensor step_through_module_calls(testing::Trainer<SmallMlp>& t, const Tensor& x, const Tensor& y) {
  t.opt->zero_grad();
  Tensor loss = cross_entropy((*t.model->fc2)((*t.model->fc1)(x).relu()), y);
  loss.backward();
  t.opt->step();
  return loss;
}

/// Three steps of `step` on new Float64 batches, each expected to give the loss `eager` gives on
/// the same batch; returns the warnings the compiled calls gave.
template <class Step>
std::vector<std::string> three_steps_as_eager(testing::Trainer<SmallMlp>& eager, Step& step) {
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    const double expected = eager.step(x, y).template item<double>();
    EXPECT_DOUBLE_EQ(step(x, y).template item<double>(), expected) << "step " << i;
  }
  set_warning_handler(previous);
  return warnings;
}

TEST_F(CompileTest, AStepThatReadsAComputedValueOnTheHostRunsEagerlyAndSaysWhere) {
  testing::Trainer<SmallMlp> eager(2, kFloat64, false), compiled(2, kFloat64, false);
  double seen = 0.0;
  auto step = compile([&](const Tensor& x, const Tensor& y) {
    Tensor loss = compiled.step(x, y);
    seen += loss.item<double>();  // frozen at the first step's value if it were replayed
    return loss;
  });
  const std::vector<std::string> warnings = three_steps_as_eager(eager, step);
  EXPECT_FALSE(step.last_call_replayed());
  EXPECT_EQ(step.stats().eager_calls, 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("item() at test_compile.cpp:"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("reads on the host a tensor this step computed"), std::string::npos) << warnings[0];
  EXPECT_LE(parameter_gap(*eager.model, *compiled.model), 0.0);
}

// A module hook is host code around the kernels: a capture cannot replay its body, so such a
// step stays eager, computes what the eager step computes, and says why once.
TEST_F(CompileTest, AStepWithAModuleHookRunsEagerlyAndSaysWhy) {
  testing::Trainer<SmallMlp> eager(2, kFloat64, false), compiled(2, kFloat64, false);
  int fired = 0;
  nn::RemovableHandle hook = compiled.model->fc1->register_forward_hook(
      [&fired](nn::Module&, const TensorList&, const TensorList&) { ++fired; });
  auto step = compile([&](const Tensor& x, const Tensor& y) { return step_through_module_calls(compiled, x, y); });
  const std::vector<std::string> warnings = three_steps_as_eager(eager, step);
  EXPECT_FALSE(step.last_call_replayed());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("a module hook (Linear) at hooks.cpp:"), std::string::npos) << warnings[0];
  EXPECT_LE(parameter_gap(*eager.model, *compiled.model), 0.0);
  EXPECT_EQ(fired, 3);
}

/// fc1 -> relu -> dropout inside an activation checkpoint, then fc2: the recomputation in
/// backward must draw the forward's dropout mask again.
struct CheckpointedDropoutMlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Dropout> drop;
  CheckpointedDropoutMlp() : Module("CheckpointedDropoutMlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(12, 16));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(16, 3));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.5));
  }
  Tensor forward(const Tensor& x) override {
    const auto region = [fc1 = fc1, drop = drop](const Tensor& in) { return (*drop)((*fc1)(in).relu()); };
    return fc2->forward(nn::checkpoint(region, x));
  }
};

/// The names of the regions of `g`.
std::set<std::string> regions_of(const compiler::Graph& g) {
  std::set<std::string> names;
  for (const compiler::Node& n : g.nodes) {
    if (n.kind == compiler::Node::Kind::Region) names.insert(n.region);
  }
  return names;
}

// A checkpointed step replays (Note [A checkpoint in a compiled step]): the recomputation is
// kernels, the generators' state taken and set again are regions, so dropout's masks in the
// forward and the recomputation agree as eagerly, and the training matches eager's.
TEST_F(CompileTest, ACheckpointedStepWithDropoutReplaysAndMatchesEagerInFloat64) {
  expect_same_training<CheckpointedDropoutMlp>(
      {6, 12}, 3, kFloat64, /*adam=*/false, 20, 1e-12, "all", [](const compiler::Graph& g) {
        const std::set<std::string> regions = regions_of(g);
        for (const char* name : {"checkpoint.get_rng_state", "checkpoint.set_rng_state", "checkpoint.put_back_rng_state"}) {
          EXPECT_TRUE(regions.contains(name)) << name;
        }
      });
}

TEST_F(CompileTest, AHookRegisteredAfterTheCaptureRunsAndItsRemovalReplaysAgain) {
  // Without a condition on the hooks, the replay would skip a hook registered after the capture
  // (Note [What a graph assumed of its modules]).
  testing::Trainer<SmallMlp> eager(2, kFloat64, false), compiled(2, kFloat64, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return step_through_module_calls(compiled, x, y); });
  std::vector<std::string> warnings;
  const WarningHandler previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  int fired = 0;
  nn::RemovableHandle hook;
  std::vector<bool> replayed;
  for (int i = 0; i < 7; ++i) {
    if (i == 2) {
      hook = compiled.model->fc2->register_forward_hook(
          [&fired](nn::Module&, const TensorList&, const TensorList&) { ++fired; });
    }
    if (i == 4) hook.remove();
    const Tensor x = randn({6, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 3, {6});
    EXPECT_NEAR(step(x, y).item<double>(), eager.step(x, y).item<double>(), 1e-12) << "step " << i;
    replayed.push_back(step.last_call_replayed());
  }
  set_warning_handler(previous);
  EXPECT_EQ(fired, 2);
  EXPECT_EQ(replayed, (std::vector<bool>{false, true, false, false, true, true, true}));
  EXPECT_EQ(step.stats().captures, 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("a module hook (Linear)"), std::string::npos) << warnings[0];
  EXPECT_LE(parameter_gap(*eager.model, *compiled.model), 1e-12);
}

TEST_F(CompileTest, TheGraphPrintsLikeFxAndExportsToDot) {
  testing::Trainer<SmallMlp> run(4, kFloat32, false);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return run.step(x, y); }, {.passes = "none"});
  step(randn({6, 12}), randint(0, 3, {6}));
  const std::string text = step.graph().print();
  EXPECT_NE(text.find("graph(%in0: float32[6, 12], %in1: int64[6]):"), std::string::npos) << text;
  EXPECT_NE(text.find("region optimizer.zero_grad()"), std::string::npos) << text;
  EXPECT_NE(text.find("= unary.relu(%"), std::string::npos) << text;
  EXPECT_NE(text.find("fc1.weight.grad = %"), std::string::npos) << text;
  EXPECT_NE(text.find("region optimizer.step()"), std::string::npos) << text;
  EXPECT_NE(text.find("return %out0"), std::string::npos) << text;
  const std::string dot = step.graph().to_dot();
  EXPECT_EQ(dot.rfind("digraph step {", 0), 0u);
  EXPECT_NE(dot.find("shape=octagon, label=\"optimizer.step\""), std::string::npos);
}

TEST_F(CompileTest, EveryPassKeepsTheResults) {
  // The same training with no pass at all and with each one alone.
  std::vector<std::string> selections{"none"};
  for (const compiler::Pass& p : compiler::all_passes()) selections.push_back(p.name);
  std::vector<double> reference;
  for (const std::string& passes : selections) {
    testing::Trainer<SmallCnn> run(5, kFloat64, true);
    auto step = compile([&](const Tensor& x, const Tensor& y) { return run.step(x, y); }, {.passes = passes});
    manual_seed(3);
    std::vector<double> losses;
    for (int i = 0; i < 5; ++i) {
      const Tensor x = randn({3, 1, 12, 12}, TensorOptions().dtype(kFloat64)), y = randint(0, 5, {3});
      losses.push_back(step(x, y).item<double>());
    }
    if (reference.empty()) reference = losses;
    EXPECT_EQ(losses, reference) << "passes: " << passes;
  }
}

TEST_F(CompileTest, AnUnknownPassIsAnError) {
  EXPECT_ERROR(compile([](const Tensor& x) { return x * 2; }, {.passes = "plan_memory,fuse_everything"}),
               "KILN_COMPILE_PASSES: unknown pass 'fuse_everything' (known: eliminate_common_subexpressions, "
               "fuse_conv_relu, ");
}

TEST_F(CompileTest, TheFusionPassesFireOnTrainCnnsStepAndKeepItsResults) {
  // Float32, the oneDNN route: each fusion pass alone against no pass, over 3 steps.
  std::vector<std::vector<double>> runs;
  std::vector<std::int64_t> reorders;  // oneDNN's layout changes per replay
  for (const std::string passes : {"none", "fuse_conv_relu", "fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool",
                                    "fuse_pool_relu_backward", "fuse_linear", "fuse_conv_bias_backward",
                                    "fuse_pool_relu_backward,fuse_conv_bias_backward,fuse_unpool_conv_backward",
                                    "all"}) {
    testing::Trainer<examples::Cnn> trainer(9, kFloat32, true);
    auto step = compile([&](const Tensor& x, const Tensor& y) { return trainer.step(x, y); }, {.passes = passes});
    manual_seed(4);
    std::vector<double> losses;
    losses.push_back(step(rand({16, 1, 28, 28}), randint(0, 10, {16})).item<double>());
    const std::int64_t reorders_before = backends::onednn_stats().reorders;
    for (int i = 1; i < 3; ++i) losses.push_back(step(rand({16, 1, 28, 28}), randint(0, 10, {16})).item<double>());
    reorders.push_back((backends::onednn_stats().reorders - reorders_before) / 2);
    for (const Tensor& p : trainer.model->parameters()) losses.push_back(p.sum().item<double>());
    runs.push_back(losses);
    const compiler::Graph& g = step.graph();
    // Without oneDNN the CPU convolves by unfold + GEMM, with no convolution kernel to fuse.
    const bool convolution_kernels = backends::onednn_is_available();
    const bool conv = convolution_kernels && (passes.starts_with("fuse_conv_relu") || passes == "all");
    const bool conv_pool = passes.ends_with("fuse_conv_pool") || passes == "all";
    const bool pool = passes.starts_with("fuse_pool_relu_backward") || conv_pool;
    if (convolution_kernels) {
      // conv1 (thin) is pooled as it is made, conv2 (oneDNN's) where its blocked output lies.
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvForwardReluMaxPool), conv_pool ? 2u : 0u) << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvForwardRelu), conv && !conv_pool ? 2u : 0u) << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::MaxPool), conv_pool ? 0u : 2u) << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvForward), conv ? 0u : 2u) << passes;
      const bool bias = passes.find("fuse_conv_bias_backward") != std::string::npos || passes == "all";
      const bool thin_unpool = passes == "all";  // conv1 reads its gradient through the pool
      const bool unpool = passes.ends_with("fuse_unpool_conv_backward") || passes == "all";  // conv2 unpools blocked
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvBackwardWeightBiasThroughMaxPool), thin_unpool ? 1u : 0u)
          << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvBackwardThroughMaxPool), unpool ? 1u : 0u) << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvBackwardWeightBias), bias ? 2u - thin_unpool - unpool : 0u)
          << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::MaxPoolBackwardRelu), pool ? 2u - thin_unpool - unpool : 0u)
          << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvBackwardInput), unpool ? 0u : 1u) << passes;
      EXPECT_EQ(g.count(compiler::KernelFamily::ConvBackwardWeight), bias ? 0u : 2u) << passes;
    }
    const bool linear = passes == "fuse_linear" || passes == "all";
    EXPECT_EQ(g.count(compiler::KernelFamily::BmmBias), linear ? 2u : 0u) << passes;  // fc1 with relu, fc2 without
  }
  for (std::size_t r = 1; r < runs.size(); ++r) {
    for (std::size_t i = 0; i < runs[0].size(); ++i) {
      EXPECT_NEAR(runs[r][i], runs[0][i], 1e-5 * (1 + std::abs(runs[0][i]))) << "run " << r << ", value " << i;
    }
  }
  // conv2's output and its gradient no longer cross to NCHW: three reorders fewer a step (its
  // forward's dst, and dY into each backward primitive).
  if (backends::onednn_is_available()) {
    EXPECT_LE(reorders.back(), reorders.front() - 3);
  }
}

TEST_F(CompileTest, TheFusedKernelsComputeWhatTheirPairsCompute) {
  // Relu's edge cases on purpose: negatives, zeros of both signs, NaN, and windows that tie.
  const Tensor x = randn({2, 3, 6, 6}) * 0.5;
  x.view({-1}).narrow(0, 0, 4).copy_(tensor({-0.0f, 0.0f, std::nanf(""), 0.0f}));
  const Im2ColGeometry geometry{.channels = 3, .height = 6, .width = 6, .kernel_h = 2, .kernel_w = 2,
                                .stride_h = 2, .stride_w = 2, .out_h = 3, .out_w = 3};
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  const Tensor y = x.relu();
  const Tensor values = empty({2, 3, 3, 3}), indices = empty({2, 3, 3, 3}, TensorOptions().dtype(kInt64));
  cpu.max_pool2d(values, indices, y, geometry);
  const Tensor dv = randn({2, 3, 3, 3});
  const Tensor pooled = empty({2, 3, 6, 6}), unfused = empty({2, 3, 6, 6}), fused = empty({2, 3, 6, 6});
  cpu.max_pool2d_backward(pooled, dv, indices);
  cpu.binary[static_cast<std::size_t>(BinaryOp::ThresholdBackward)](unfused, pooled, y);
  cpu.max_pool2d_backward_relu(fused, dv, indices, values);
  EXPECT_TRUE(equal(fused, unfused));

  // Linear: the product with its bias, and relu, against the three kernels (oneDNN's route for
  // the large one, Eigen's for the small one).
  // A NaN in the bias makes a column of NaNs, which relu must let through.
  for (const std::int64_t size : {8, 96}) {
    const Tensor a = randn({1, size, size}), w = randn({size, size}).t().unsqueeze(0), bias = randn({size});
    bias.narrow(0, 3, 1).fill_(std::nan(""));
    for (const bool relu : {false, true}) {
      const Tensor expected = empty({1, size, size}), out = empty({1, size, size});
      cpu.bmm(expected, a, w);
      cpu.binary[static_cast<std::size_t>(BinaryOp::Add)](expected, expected, bias);
      if (relu) cpu.unary[static_cast<std::size_t>(UnaryOp::Relu)](expected, expected);
      cpu.bmm_bias(out, a, w, bias, relu);
      const Tensor nan = expected.ne(expected);
      EXPECT_EQ(nan.sum().item<double>(), static_cast<double>(size)) << size << (relu ? " with relu" : "");
      EXPECT_TRUE(equal(out.ne(out), nan)) << size << (relu ? " with relu" : "");
      EXPECT_TRUE(equal(out.masked_fill(nan, 0.0), expected.masked_fill(nan, 0.0))) << size << (relu ? " with relu" : "");
    }
  }

  // The convolution: Kiln's thin kernel (1 input channel) and oneDNN's (8 channels), a NaN
  // among the inputs, which relu must let through as Kiln's relu does.
  for (const std::int64_t channels : {1, 8}) {
    const Tensor input = randn({2, channels, 9, 9}), weight = randn({4, channels, 3, 3}), bias = randn({4});
    input.view({-1}).narrow(0, 30, 1).fill_(std::nan(""));
    const Im2ColGeometry g{.channels = channels, .height = 9, .width = 9, .kernel_h = 3, .kernel_w = 3,
                           .pad_h = 1, .pad_w = 1, .out_h = 9, .out_w = 9};
    const Tensor conv = empty({2, 4, 9, 9}), expected = empty({2, 4, 9, 9}), out = empty({2, 4, 9, 9});
    cpu.conv2d.forward(conv, input, weight, bias, g, 1);
    cpu.unary[static_cast<std::size_t>(UnaryOp::Relu)](expected, conv);
    cpu.conv2d.forward_relu(out, input, weight, bias, g, 1);
    const Tensor nan = expected.ne(expected);
    EXPECT_GT(nan.sum().item<double>(), 0) << channels << " channels";
    EXPECT_TRUE(equal(out.ne(out), nan)) << channels << " channels";
    EXPECT_TRUE(equal(out.masked_fill(nan, 0.0), expected.masked_fill(nan, 0.0))) << channels << " channels";
  }

  // The thin convolution pooled as it is made, against forward_relu then max_pool2d: values
  // and indices bit for bit, with ties (relu's zeros), a NaN, an odd size the pool's floor cuts,
  // and BFloat16, whose pool compares the values as stored.
  for (const DType dtype : {kFloat32, kBFloat16}) {
    for (const std::int64_t size : {12, 11}) {
      const Tensor input = randn({3, 1, size, size}).to(dtype), weight = randn({8, 1, 3, 3}).to(dtype);
      const Tensor bias = randn({8}).to(dtype);
      input.view({-1}).narrow(0, 40, 1).fill_(std::nan(""));
      // 12: unit stride; 11: stride 2 (pad 6 keeps an 11x11 output), whose rows are unpadded and odd.
      const std::int64_t stride = size == 12 ? 1 : 2, pad = size == 12 ? 1 : 6;
      const Im2ColGeometry conv_g{.channels = 1, .height = size, .width = size, .kernel_h = 3, .kernel_w = 3,
                                  .pad_h = pad, .pad_w = pad, .stride_h = stride, .stride_w = stride,
                                  .out_h = size, .out_w = size};
      const Im2ColGeometry pool_g{.channels = 8, .height = size, .width = size, .kernel_h = 2, .kernel_w = 2,
                                  .stride_h = 2, .stride_w = 2, .out_h = size / 2, .out_w = size / 2};
      const Tensor conv = empty({3, 8, size, size}, TensorOptions().dtype(dtype));
      const Tensor expected = empty({3, 8, size / 2, size / 2}, TensorOptions().dtype(dtype));
      const Tensor values = empty_like(expected);
      const Tensor indices = empty({3, 8, size / 2, size / 2}, TensorOptions().dtype(kInt64));
      const Tensor expected_indices = empty_like(indices);
      cpu.conv2d.forward_relu(conv, input, weight, bias, conv_g, 1);
      cpu.max_pool2d(expected, expected_indices, conv, pool_g);
      cpu.conv2d.forward_relu_max_pool(values, indices, input, weight, bias, conv_g, pool_g, 1);
      const Tensor nan = expected.ne(expected);
      EXPECT_TRUE(equal(values.ne(values), nan)) << size;
      EXPECT_TRUE(equal(values.masked_fill(nan, 0.0), expected.masked_fill(nan, 0.0))) << size;
      EXPECT_TRUE(equal(indices, expected_indices)) << size;
      EXPECT_GT(nan.sum().item<double>(), 0) << "the NaN must reach a window";
      EXPECT_GT((expected == 0).sum().item<double>(), 0) << "ties of relu's zeros";
    }
  }

  // The thin weight and bias gradients read through the pool's backward, against the pool's
  // backward then the weight and bias gradients: bit for bit, with windows whose value is zero
  // (relu's backward passes nothing there) or NaN, and in BFloat16.
  for (const DType dtype : {kFloat32, kBFloat16}) {
    const Tensor input = randn({3, 1, 12, 12}).to(dtype), activation = randn({3, 8, 12, 12}).relu().to(dtype);
    activation.view({-1}).narrow(0, 7, 1).fill_(std::nan(""));
    const Im2ColGeometry conv_g{.channels = 1, .height = 12, .width = 12, .kernel_h = 3, .kernel_w = 3,
                                .pad_h = 1, .pad_w = 1, .out_h = 12, .out_w = 12};
    const Im2ColGeometry pool_g{.channels = 8, .height = 12, .width = 12, .kernel_h = 2, .kernel_w = 2,
                                .stride_h = 2, .stride_w = 2, .out_h = 6, .out_w = 6};
    const TensorOptions options = TensorOptions().dtype(dtype);
    const Tensor values = empty({3, 8, 6, 6}, options), indices = empty({3, 8, 6, 6}, TensorOptions().dtype(kInt64));
    cpu.max_pool2d(values, indices, activation, pool_g);
    const Tensor grad_pooled = randn({3, 8, 6, 6}).to(dtype), unpooled = empty({3, 8, 12, 12}, options);
    cpu.max_pool2d_backward_relu(unpooled, grad_pooled, indices, values);
    const Tensor expected_weight = empty({8, 1, 3, 3}, options), expected_bias = empty({1, 8, 1, 1}, options);
    cpu.conv2d.backward_weight_bias(expected_weight, expected_bias, unpooled, input, conv_g, 1);
    const Tensor weight = empty({8, 1, 3, 3}, options), bias = empty({1, 8, 1, 1}, options);
    cpu.conv2d.backward_weight_bias_through_max_pool(weight, bias, grad_pooled, indices, values, input, conv_g, 1);
    EXPECT_TRUE(equal(weight.ne(weight), expected_weight.ne(expected_weight)));
    EXPECT_TRUE(equal(weight.masked_fill(weight.ne(weight), 0.0), expected_weight.masked_fill(weight.ne(weight), 0.0)));
    EXPECT_TRUE(equal(bias.masked_fill(bias.ne(bias), 0.0), expected_bias.masked_fill(bias.ne(bias), 0.0)));
    EXPECT_GT((values == 0).sum().item<double>(), 0) << "windows relu's backward stops";
  }

  // oneDNN's convolution pooled where its blocked output lies, and its two backward passes
  // reading the gradient unpooled into that layout (Note [A convolution's blocked output pooled
  // where it lies]), against the pairs and the trio: bit for bit, with NaN, relu's zeros, a
  // channel count that pads the last block, overlapping windows, and BFloat16 where oneDNN has it.
  if (backends::onednn_is_available()) {
    for (const DType dtype : {kFloat32, kBFloat16}) {
      if (dtype == kBFloat16 && !backends::onednn_has_bf16()) continue;
      for (const std::int64_t out_channels : {24, 32}) {
        for (const std::int64_t kernel : {2, 3}) {
          const TensorOptions options = TensorOptions().dtype(dtype);
          const Tensor input = randn({3, 8, 11, 11}).to(dtype), weight = (randn({out_channels, 8, 3, 3}) * 0.3).to(dtype);
          const Tensor bias = randn({out_channels}).to(dtype);
          input.view({-1}).narrow(0, 50, 1).fill_(std::nan(""));
          const Im2ColGeometry conv_g{.channels = 8, .height = 11, .width = 11, .kernel_h = 3, .kernel_w = 3,
                                      .pad_h = 1, .pad_w = 1, .out_h = 11, .out_w = 11};
          // 2x2 stride 2 (the floor cuts the odd edge), and 3x3 stride 2 padded (windows overlap).
          const std::int64_t pad = kernel == 3 ? 1 : 0, pooled_size = kernel == 3 ? 6 : 5;
          const Im2ColGeometry pool_g{.channels = out_channels, .height = 11, .width = 11, .kernel_h = kernel,
                                      .kernel_w = kernel, .pad_h = pad, .pad_w = pad, .stride_h = 2, .stride_w = 2,
                                      .out_h = pooled_size, .out_w = pooled_size};
          const Tensor conv = empty({3, out_channels, 11, 11}, options);
          const Tensor expected = empty({3, out_channels, pooled_size, pooled_size}, options);
          const Tensor expected_indices = empty(expected.sizes(), TensorOptions().dtype(kInt64));
          cpu.conv2d.forward_relu(conv, input, weight, bias, conv_g, 1);
          cpu.max_pool2d(expected, expected_indices, conv, pool_g);
          const Tensor values = empty_like(expected), indices = empty_like(expected_indices);
          cpu.conv2d.forward_relu_max_pool(values, indices, input, weight, bias, conv_g, pool_g, 1);
          const std::string what = std::string(dtype_name(dtype)) + ", " + std::to_string(out_channels) +
                                   " channels, pool " + std::to_string(kernel);
          const Tensor nan = expected.ne(expected);
          EXPECT_GT(nan.sum().item<double>(), 0) << what << ": the NaN must pass relu (Note [oneDNN's relu drops NaN])";
          EXPECT_TRUE(equal(values.ne(values), nan)) << what;
          EXPECT_TRUE(equal(values.masked_fill(nan, 0.0), expected.masked_fill(nan, 0.0))) << what;
          EXPECT_TRUE(equal(indices, expected_indices)) << what;

          const Tensor grad_pooled = randn(values.sizes()).to(dtype), clean = values.masked_fill(nan, 1.0);
          const Tensor finite_input = input.masked_fill(input.ne(input), 0.5);
          const Tensor unpooled = empty({3, out_channels, 11, 11}, options);
          cpu.max_pool2d_backward_relu(unpooled, grad_pooled, indices, clean);
          const Tensor want_input = empty_like(input), want_weight = empty_like(weight);
          const Tensor want_bias = empty({1, out_channels, 1, 1}, options);
          cpu.conv2d.backward_input(want_input, unpooled, weight, conv_g, 1);
          cpu.conv2d.backward_weight_bias(want_weight, want_bias, unpooled, finite_input, conv_g, 1);
          const Tensor got_input = empty_like(input), got_weight = empty_like(weight), got_bias = empty_like(want_bias);
          cpu.conv2d.backward_through_max_pool(got_input, got_weight, got_bias, grad_pooled, indices, clean, weight,
                                               finite_input, conv_g, 1);
          EXPECT_TRUE(equal(got_input, want_input)) << what;
          EXPECT_TRUE(equal(got_weight, want_weight)) << what;
          EXPECT_TRUE(equal(got_bias, want_bias)) << what;
          // A first layer's weight and bias gradients alone, unpooled into the weight primitive's layout.
          const Tensor alone_weight = empty_like(weight), alone_bias = empty_like(want_bias);
          cpu.conv2d.backward_weight_bias_through_max_pool(alone_weight, alone_bias, grad_pooled, indices, clean,
                                                           finite_input, conv_g, 1);
          EXPECT_TRUE(equal(alone_weight, want_weight)) << what;
          EXPECT_TRUE(equal(alone_bias, want_bias)) << what;
          EXPECT_GT((clean == 0).sum().item<double>(), 0) << what << ": windows relu's backward stops";
        }
      }
    }
  }

  // The weight and bias gradients together (Note [The bias gradient inside the weight
  // gradient]): the weight's exactly as the weight kernel makes it; the bias's as Kiln's sum makes
  // it on the Eigen route, and on the thin (1 channel in) and oneDNN routes, which sum in their
  // own orders, within the error bound of a Float32 sum of its 2·31·31 terms, checked against
  // the sum in Float64.
  for (const std::int64_t channels : {1, 8}) {
    const Tensor input = randn({2, channels, 33, 33}), grad_output = randn({2, 16, 31, 31}) + 3.0;
    const Im2ColGeometry g{.channels = channels, .height = 33, .width = 33, .kernel_h = 3, .kernel_w = 3,
                           .out_h = 31, .out_w = 31};
    const Tensor weight = empty({16, channels, 3, 3}), expected_weight = empty({16, channels, 3, 3});
    const Tensor bias = empty({1, 16, 1, 1}), expected_bias = empty({1, 16, 1, 1});
    cpu.conv2d.backward_weight(expected_weight, grad_output, input, g, 1);
    cpu.reduce[static_cast<std::size_t>(ReduceOp::Sum)](expected_bias, grad_output, {0, 2, 3}, 1.0);
    cpu.conv2d.backward_weight_bias(weight, bias, grad_output, input, g, 1);
    EXPECT_TRUE(equal(weight, expected_weight)) << channels << " channels";
    const Tensor exact = grad_output.to(kFloat64).sum({0, 2, 3}, /*keepdim=*/true);
    const double bound = 2 * 31 * 31 * 0x1p-24 * grad_output.abs().sum({0, 2, 3}).max().item<double>();
    EXPECT_LE((bias.to(kFloat64) - exact).abs().max().item<double>(), bound) << channels << " channels";
    if (!backends::onednn_is_available()) {
      EXPECT_TRUE(equal(bias, expected_bias)) << channels << " channels";
    }
  }
}

// An LSTM's and a ConvTranspose2d's calls are noted (Note [Layer scopes]) with the nodes their
// kernels made and the tensors they took and returned.
TEST_F(CompileTest, LayerCallsAreNotedWithTheirNodes) {
  manual_seed(9);
  nn::Linear before(4, 5);
  nn::LSTM lstm(5, 3, {.batch_first = true});
  nn::ConvTranspose2d deconv(1, 2, 2);
  compiler::Capture capture;
  const Tensor h0 = zeros({1, 2, 3}), c0 = zeros({1, 2, 3});
  const std::vector<Tensor> out = capture.run(
      [&](const std::vector<Tensor>& x) {
        const auto [y, state] = lstm(before(x[0]), {h0, c0});
        return std::vector<Tensor>{y, std::get<0>(state), deconv(y.unsqueeze(1))};
      },
      {randn({2, 6, 4})});
  ASSERT_TRUE(capture.failure().empty()) << capture.failure();
  const std::vector<compiler::Scope>& scopes = capture.scopes();
  ASSERT_EQ(scopes.size(), 2u);
  EXPECT_EQ(scopes[0].owner, static_cast<const void*>(&lstm));
  EXPECT_EQ(scopes[0].name, "LSTM");
  EXPECT_EQ(scopes[1].owner, static_cast<const void*>(&deconv));
  EXPECT_EQ(scopes[1].name, "ConvTranspose2d");
  // The Linear's kernel came first; the LSTM's kernels end where the unsqueeze's view (no
  // kernel) leads straight into the transposed convolution's.
  EXPECT_GT(scopes[0].begin, 0u);
  EXPECT_GT(scopes[0].end, scopes[0].begin);
  EXPECT_EQ(scopes[1].begin, scopes[0].end);
  const compiler::Graph graph = capture.take_graph(out);
  EXPECT_EQ(scopes[1].end, graph.nodes.size());
  ASSERT_EQ(scopes[0].args.size(), 3u);
  EXPECT_TRUE(scopes[0].args[1].is_same(h0));
  ASSERT_EQ(scopes[0].results.size(), 3u);
  EXPECT_TRUE(scopes[0].results[0].is_same(out[0]));
  EXPECT_EQ(scopes[0].results[0].sizes(), IntArrayRef({2, 6, 3}));
  ASSERT_EQ(scopes[1].results.size(), 1u);
  EXPECT_TRUE(scopes[1].results[0].is_same(out[2]));
}

}  // namespace
}  // namespace kiln
