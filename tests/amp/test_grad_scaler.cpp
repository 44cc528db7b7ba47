// tests/amp/test_grad_scaler.cpp — GradScaler on the CPU: PyTorch's defaults, the
// once-per-step rules, skipping a step on inf/NaN and halving the scale, growth after
// growth_interval clean steps, clipping after unscale_, Float16 overflow, state dicts.
#include <cmath>
#include <limits>

#include "core/ops/optim.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values_near;

namespace {

/// loss = sum(p * c): the gradient of p is exactly c.
Tensor linear_loss(const Tensor& p, const std::vector<double>& c) { return (p * tensor(c)).sum(); }

}  // namespace

TEST(GradScaler, HasPyTorchsDefaultsAndScalesTheLoss) {
  amp::GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
  EXPECT_TRUE(values_near(scaler.scale(tensor(1.5f)), {98304.0}));
}

TEST(GradScaler, UnscalesTheGradientsBeforeTheStep) {
  const Tensor p = tensor({1.0f, 2.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  scaler.scale(linear_loss(p, {0.5, -0.25})).backward();
  EXPECT_TRUE(values_near(p.grad(), {32768.0, -16384.0}));
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_TRUE(values_near(p.grad(), {0.5, -0.25}));
  EXPECT_TRUE(values_near(p, {0.95, 2.025}));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, AnInfGradientSkipsTheStepAndHalvesTheScale) {
  const Tensor p = tensor({1.0f, 2.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    opt.zero_grad();
    scaler.scale(linear_loss(p, {1.0, bad})).backward();
    EXPECT_FALSE(scaler.step(opt)) << "grad held " << bad;
    scaler.update();
    EXPECT_TRUE(values_near(p, {1.0, 2.0})) << "the skipped step left p alone";
  }
  EXPECT_EQ(scaler.get_scale(), 16384.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanStepsAndAnInfResetsTheCount) {
  const Tensor p = tensor({1.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(0.0));
  amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 3});
  auto step_with = [&](double c) {
    opt.zero_grad();
    scaler.scale(linear_loss(p, {c})).backward();
    scaler.step(opt);
    scaler.update();
  };
  step_with(1.0);
  step_with(1.0);
  EXPECT_EQ(scaler.get_scale(), 8.0);
  step_with(std::numeric_limits<double>::infinity());
  EXPECT_EQ(scaler.get_scale(), 4.0);
  for (int i = 0; i < 2; ++i) step_with(1.0);
  EXPECT_EQ(scaler.get_scale(), 4.0);
  step_with(1.0);
  EXPECT_EQ(scaler.get_scale(), 8.0) << "three clean steps after the back-off";
  scaler.update(2.0);
  EXPECT_EQ(scaler.get_scale(), 2.0) << "an explicit new scale";
}

TEST(GradScaler, EachStageOnceBetweenUpdates) {
  const Tensor p = tensor({1.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  EXPECT_ERROR(scaler.update(), "No inf checks were recorded prior to update.");
  scaler.scale(linear_loss(p, {1.0})).backward();
  scaler.unscale_(opt);
  EXPECT_ERROR(scaler.unscale_(opt), "unscale_() has already been called on this optimizer since the last update().");
  scaler.step(opt);
  EXPECT_ERROR(scaler.step(opt), "step() has already been called since the last update().");
  EXPECT_ERROR(scaler.unscale_(opt), "unscale_() is being called after step().");
  scaler.update();
  scaler.unscale_(opt);  // a new step may unscale again
}

TEST(GradScaler, ClippingAfterUnscaleSeesTheTrueGradients) {
  const Tensor p = tensor({1.0f, 1.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  amp::GradScaler scaler;
  scaler.scale(linear_loss(p, {3.0, 4.0})).backward();
  scaler.unscale_(opt);
  const Tensor norm = optim::clip_grad_norm_({p}, 1.0);
  EXPECT_NEAR(norm.item<float>(), 5.0, 1e-5) << "the norm of the unscaled gradient";
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_TRUE(values_near(p, {1.0 - 0.6, 1.0 - 0.8}, 1e-5));
  scaler.update();
}

TEST(GradScaler, Float16GradientsThatOverflowAtALargeScaleAreDetected) {
  // A Float32 parameter used in Float16 (as under CUDA autocast): the scaled gradient flowing
  // into the Float16 activation is 65536, above Float16's largest value 65504: it becomes inf
  // and reaches the parameter as inf. The scaler skips the step and halves the scale; at
  // 32768 the same gradient fits and the step runs with the exact true gradient.
  const Tensor p = tensor({1.0f, 2.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler;
  auto backward = [&] {
    opt.zero_grad();
    const Tensor h = p.to(kFloat16) * 0.25;
    ASSERT_EQ(h.dtype(), kFloat16);
    scaler.scale(h.sum()).backward();
  };
  backward();
  EXPECT_TRUE(std::isinf(p.grad()[0].item<float>()));
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  backward();
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_TRUE(values_near(p, {1.0 - 0.025, 2.0 - 0.025}));
  scaler.update();
}

TEST(GradScaler, Float16ParameterGradientsAreRefusedLikePyTorch) {
  const Tensor p = tensor({1.0f}, dtype(kFloat16).requires_grad(true));
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  amp::GradScaler scaler({.init_scale = 4.0});
  scaler.scale(p.sum()).backward();
  EXPECT_ERROR(scaler.unscale_(opt), "Attempting to unscale FP16 gradients.");
}

TEST(GradScaler, TheUnscalePassChecksEveryFloatingDtype) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor ok = tensor({2.0, 4.0}, dtype(t)), bad = tensor({1.0, double(INFINITY)}, dtype(t));
    const Tensor flag = zeros({1});
    ops::unscale_and_check_({ok}, 0.5, flag);
    EXPECT_TRUE(values_near(ok, {1.0, 2.0})) << t;
    EXPECT_EQ(flag.item<float>(), 0.0f) << t;
    ops::unscale_and_check_({bad}, 0.5, flag);
    EXPECT_EQ(flag.item<float>(), 1.0f) << t;
  }
}

TEST(GradScaler, StateDictRoundTripsAndDisabledScalersPassThrough) {
  amp::GradScaler a({.init_scale = 8.0, .growth_interval = 5});
  const Tensor p = tensor({1.0f}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  a.scale(p.sum()).backward();
  a.step(opt);
  a.update();
  const StateDict state = a.state_dict();
  EXPECT_EQ(state.at("scale").item<double>(), 8.0);
  EXPECT_EQ(state.at("_growth_tracker").item<std::int64_t>(), 1);
  amp::GradScaler b;
  b.load_state_dict(state);
  EXPECT_EQ(b.get_scale(), 8.0);
  EXPECT_EQ(b.growth_tracker(), 1);
  EXPECT_EQ(b.options().growth_interval, 5);
  EXPECT_ERROR(b.load_state_dict({}), "The source state dict is empty, possibly because it was saved from "
                                      "a disabled instance of GradScaler.");

  amp::GradScaler off({.enabled = false});
  const Tensor loss = p.sum();
  EXPECT_TRUE(off.scale(loss).is_same(loss));
  EXPECT_EQ(off.get_scale(), 1.0);
  EXPECT_TRUE(off.state_dict().empty());
}
