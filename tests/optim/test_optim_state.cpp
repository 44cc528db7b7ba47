// tests/optim/test_optim_state.cpp — optimizer and scheduler state round trips: an optimizer
// (or schedule) loaded from another's state_dict continues exactly as the original does, the
// dict has PyTorch's layout, and a dict that does not fit is refused with the difference named
// and nothing changed.
#include <functional>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(TensorList)>;

/// Two parameters (a matrix and a vector) and a fixed quadratic loss whose gradient changes
/// with the parameters, so that moments matter.
struct Problem {
  Tensor w = tensor({{1.0, -2.0}, {0.5, 3.0}}, dtype(kFloat64).requires_grad(true));
  Tensor b = tensor({0.25, -1.0}, dtype(kFloat64).requires_grad(true));
  void step(optim::Optimizer& opt) const {
    opt.zero_grad();
    ((w * w).sum() * 0.5 + (w.sum(0) * b).sum() + (b * b * b).sum()).backward();
    opt.step();
  }
  Problem clone() const {
    Problem p;
    NoGradGuard no_grad;
    p.w.copy_(w);
    p.b.copy_(b);
    return p;
  }
};

void expect_round_trip(const MakeOptimizer& make) {
  Problem original;
  auto opt = make({original.w, original.b});
  for (int i = 0; i < 3; ++i) original.step(*opt);
  Problem copy = original.clone();
  auto restored = make({copy.w, copy.b});
  restored->load_state_dict(opt->state_dict());
  for (int i = 0; i < 3; ++i) {
    original.step(*opt);
    copy.step(*restored);
  }
  // Bit-identical, not merely close: every moment and step count came across.
  EXPECT_EQ(values(copy.w), values(original.w));
  EXPECT_EQ(values(copy.b), values(original.b));
}

TEST(OptimizerState, SgdWithMomentumAndNesterovRoundTrips) {
  expect_round_trip([](TensorList p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  });
}

TEST(OptimizerState, AdamWithAmsgradRoundTrips) {
  expect_round_trip([](TensorList p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.05).amsgrad(true).weight_decay(0.1));
  });
}

TEST(OptimizerState, AdamWRoundTrips) {
  expect_round_trip([](TensorList p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.05)); });
}

TEST(OptimizerState, CenteredRmspropWithMomentumRoundTrips) {
  expect_round_trip([](TensorList p) {
    return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01).centered(true).momentum(0.5));
  });
}

TEST(OptimizerState, HasPyTorchsLayoutWithIndicesAcrossGroups) {
  Problem pr;
  optim::Adam opt({pr.w}, optim::AdamOptions(0.1));
  opt.add_param_group({pr.b}, optim::AdamOptions(0.01).betas({0.8, 0.9}));
  pr.step(opt);
  const StateDict d = opt.state_dict();
  // state is keyed by the parameter's index counted over all groups: b is parameter 1.
  for (const char* key : {"state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq", "state.1.step", "state.1.exp_avg",
                          "param_groups.0.lr", "param_groups.0.betas", "param_groups.0.eps",
                          "param_groups.0.weight_decay", "param_groups.0.amsgrad", "param_groups.0.maximize",
                          "param_groups.0.params", "param_groups.1.lr", "param_groups.1.params"}) {
    EXPECT_TRUE(d.contains(key)) << key;
  }
  EXPECT_EQ(d.at("state.1.step").dtype(), kFloat32);  // PyTorch keeps step as a Float32 scalar
  EXPECT_EQ(d.at("state.1.step").item<double>(), 1.0);
  EXPECT_EQ(values(d.at("param_groups.1.params")), std::vector<double>{1.0});
  EXPECT_EQ(values(d.at("param_groups.1.betas")), (std::vector<double>{0.8, 0.9}));
  EXPECT_EQ(d.at("param_groups.1.lr").item<double>(), 0.01);
}

TEST(OptimizerState, HyperparametersSetBySchedulesSurvive) {
  Problem pr;
  optim::SGD opt({pr.w, pr.b}, optim::SGDOptions(0.1).momentum(0.9));
  optim::OneCycleLR schedule(opt, 1.0, 10);
  for (int i = 0; i < 4; ++i) {
    pr.step(opt);
    schedule.step();
  }
  Problem copy = pr.clone();
  optim::SGD restored({copy.w, copy.b}, optim::SGDOptions(123.0));
  restored.load_state_dict(opt.state_dict());
  const auto& mine = static_cast<const optim::SGDOptions&>(*restored.param_groups()[0].options);
  const auto& theirs = static_cast<const optim::SGDOptions&>(*opt.param_groups()[0].options);
  EXPECT_EQ(mine.lr, theirs.lr);
  EXPECT_EQ(mine.momentum_, theirs.momentum_);  // OneCycle moves the momentum too
}

TEST(OptimizerState, AnotherOptimizersStateIsRefusedAndNothingChanges) {
  Problem pr;
  optim::SGD sgd({pr.w, pr.b}, optim::SGDOptions(0.1).momentum(0.9));
  pr.step(sgd);
  Problem other = pr.clone();
  optim::Adam adam({other.w, other.b}, optim::AdamOptions(0.01));
  other.step(adam);
  const StateDict before = adam.state_dict();
  EXPECT_ERROR(adam.load_state_dict(sgd.state_dict()), "was it saved from another optimizer type?");
  EXPECT_ERROR(adam.load_state_dict(sgd.state_dict()), "{lr, momentum, dampening, weight_decay, nesterov, maximize}");
  // The failed load left Adam's state as it was.
  const StateDict after = adam.state_dict();
  ASSERT_EQ(after.size(), before.size());
  EXPECT_EQ(values(after.at("state.0.exp_avg")), values(before.at("state.0.exp_avg")));
  EXPECT_EQ(after.at("param_groups.0.lr").item<double>(), 0.01);
}

TEST(OptimizerState, MismatchedShapesGroupsAndKeysAreNamed) {
  Problem pr;
  optim::Adam opt({pr.w, pr.b}, optim::AdamOptions(0.1));
  pr.step(opt);
  const StateDict saved = opt.state_dict();

  // Another shape: the parameters are swapped.
  optim::Adam swapped({pr.b, pr.w}, optim::AdamOptions(0.1));
  EXPECT_ERROR(swapped.load_state_dict(saved), "loaded state 'state.0.exp_avg' has shape [2, 2] but parameter 0 has shape [2]");
  // Another group structure.
  optim::Adam two_groups({pr.w}, optim::AdamOptions(0.1));
  two_groups.add_param_group({pr.b}, optim::AdamOptions(0.1));
  EXPECT_ERROR(two_groups.load_state_dict(saved), "loaded state dict has a different number of parameter groups");
  Tensor extra = zeros({3}, dtype(kFloat64).requires_grad(true));
  optim::Adam bigger({pr.w, pr.b, extra}, optim::AdamOptions(0.1));
  EXPECT_ERROR(bigger.load_state_dict(saved),
               "loaded state dict contains a parameter group that doesn't match the size of optimizer's group");
  // A missing hyperparameter and an unexpected key.
  StateDict missing;
  for (const auto& [k, v] : saved) {
    if (k != "param_groups.0.eps") missing.insert(k, v);
  }
  EXPECT_ERROR(opt.load_state_dict(missing), "has hyperparameters");
  StateDict unexpected = saved;
  unexpected.insert("momentum", tensor(0.9));
  EXPECT_ERROR(opt.load_state_dict(unexpected), "unexpected key in optimizer state dict: 'momentum'");
  StateDict out_of_range = saved;
  out_of_range.insert("state.7.exp_avg", zeros({2}, kFloat64));
  EXPECT_ERROR(opt.load_state_dict(out_of_range), "state for parameter 7 but this optimizer has 2 parameters");
}

// --- schedulers -----------------------------------------------------------------------------

using MakeScheduler = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

/// Steps a schedule 5 times, restores a fresh optimizer and schedule from the states, and
/// checks that both then produce the same lrs for 10 more steps.
void expect_schedule_round_trip(const MakeScheduler& make) {
  Problem pr;
  optim::SGD opt({pr.w, pr.b}, optim::SGDOptions(0.1).momentum(0.9));
  auto schedule = make(opt);
  for (int i = 0; i < 5; ++i) schedule->step();
  Problem copy = pr.clone();
  optim::SGD opt2({copy.w, copy.b}, optim::SGDOptions(0.1).momentum(0.9));
  auto schedule2 = make(opt2);
  opt2.load_state_dict(opt.state_dict());
  schedule2->load_state_dict(schedule->state_dict());
  EXPECT_EQ(schedule2->last_epoch(), schedule->last_epoch());
  EXPECT_EQ(schedule2->get_last_lr(), schedule->get_last_lr());
  for (int i = 0; i < 10; ++i) {
    schedule->step();
    schedule2->step();
    EXPECT_EQ(schedule2->get_last_lr(), schedule->get_last_lr()) << "step " << i;
  }
}

TEST(SchedulerState, EveryScheduleRoundTrips) {
  expect_schedule_round_trip([](optim::Optimizer& o) { return std::make_unique<optim::StepLR>(o, 3, 0.5); });
  expect_schedule_round_trip(
      [](optim::Optimizer& o) { return std::make_unique<optim::MultiStepLR>(o, std::vector<std::int64_t>{2, 7}, 0.3); });
  expect_schedule_round_trip([](optim::Optimizer& o) { return std::make_unique<optim::ExponentialLR>(o, 0.9); });
  expect_schedule_round_trip([](optim::Optimizer& o) { return std::make_unique<optim::CosineAnnealingLR>(o, 12, 0.001); });
  expect_schedule_round_trip([](optim::Optimizer& o) { return std::make_unique<optim::LinearLR>(o, 0.25, 1.0, 8); });
  expect_schedule_round_trip([](optim::Optimizer& o) { return std::make_unique<optim::OneCycleLR>(o, 1.0, 20); });
}

TEST(SchedulerState, HasPyTorchsKeysAndRefusesOtherGroupCounts) {
  Problem pr;
  optim::SGD opt({pr.w}, optim::SGDOptions(0.1));
  optim::StepLR schedule(opt, 2);
  schedule.step();
  const StateDict d = schedule.state_dict();
  EXPECT_EQ(d.at("last_epoch").item<std::int64_t>(), 1);
  EXPECT_EQ(values(d.at("base_lrs")), std::vector<double>{0.1});
  EXPECT_EQ(values(d.at("_last_lr")), std::vector<double>{0.1});
  optim::SGD two({pr.w}, optim::SGDOptions(0.1));
  two.add_param_group({pr.b}, optim::SGDOptions(0.2));
  optim::StepLR other(two, 2);
  EXPECT_ERROR(other.load_state_dict(d), "the state has base_lrs for 1 parameter groups but the optimizer has 2");
  EXPECT_ERROR(schedule.load_state_dict(StateDict{{"last_epoch", tensor(std::int64_t{3})}}),
               "the state dict is missing 'base_lrs'");
}

TEST(SchedulerState, ReduceLrOnPlateauRoundTrips) {
  Problem pr;
  optim::SGD opt({pr.w}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau plateau(opt, {.patience = 2});
  const std::vector<double> metrics = {5, 4, 4, 4, 4, 3, 3, 3, 3, 3, 3};
  for (std::size_t i = 0; i < 4; ++i) plateau.step(metrics[i]);
  optim::SGD opt2({pr.w}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau plateau2(opt2, {.patience = 2});
  opt2.load_state_dict(opt.state_dict());
  plateau2.load_state_dict(plateau.state_dict());
  EXPECT_EQ(plateau2.num_bad_epochs(), plateau.num_bad_epochs());
  for (std::size_t i = 4; i < metrics.size(); ++i) {
    plateau.step(metrics[i]);
    plateau2.step(metrics[i]);
    EXPECT_EQ(plateau2.get_last_lr(), plateau.get_last_lr()) << "step " << i;
  }
  EXPECT_LT(plateau.get_last_lr()[0], 1.0);  // the plateau was reached: the test saw a reduction
}

}  // namespace
