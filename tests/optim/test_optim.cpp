// tests/optim/test_optim.cpp — each optimizer follows PyTorch's update rule exactly: a few
// steps of a fixed linear loss, derived by hand for SGD in the comments and checked against
// values printed by PyTorch 1.13 (Float64) for the others. Also schedulers, clipping and
// state dicts.
#include <cmath>
#include <functional>

#include "core/ops/optim.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;
using kiln::testing::values_near;

namespace {

/// Three steps on loss = sum(p * [0.5, 1]) from p = [1, -2]: the gradient is always [0.5, 1].
std::vector<std::vector<double>> run(const std::function<std::unique_ptr<optim::Optimizer>(TensorList)>& make) {
  Tensor p = tensor({1.0, -2.0}, dtype(kFloat64).requires_grad(true));
  Tensor c = tensor({0.5, 1.0}, kFloat64);
  auto opt = make({p});
  std::vector<std::vector<double>> out;
  for (int i = 0; i < 3; ++i) {
    opt->zero_grad();
    (p * c).sum().backward();
    opt->step();
    out.push_back(values(p));
  }
  return out;
}

void expect_steps(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    for (std::size_t j = 0; j < 2; ++j) EXPECT_NEAR(got[i][j], want[i][j], 1e-9) << "step " << i << " element " << j;
  }
}

}  // namespace

TEST(SGD, MomentumAndWeightDecay) {
  // lr 0.1, momentum 0.9, weight_decay 0.01, g = [0.5, 1]:
  // step 1: g' = g + 0.01 p = [0.51, 0.98]; buf = g'; p -= 0.1 buf -> [0.949, -2.098]
  // step 2: g' = [0.50949, 0.97902]; buf = 0.9 [0.51, 0.98] + g' = [0.96849, 1.86102];
  //         p -= 0.1 buf -> [0.852151, -2.284102]
  expect_steps(run([](TensorList p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01)); }),
               {{0.949, -2.098}, {0.852151, -2.284102}, {0.714134749, -2.549309698}});
}

TEST(SGD, NesterovDampeningMaximize) {
  // Nesterov: g + 0.9 buf. Step 1: buf = g, p -= 0.1 (g + 0.9 g) = 0.19 g -> [0.905, -2.19]
  expect_steps(run([](TensorList p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.9).nesterov(true)); }),
               {{0.905, -2.19}, {0.7695, -2.461}, {0.59755, -2.8049}});
  // maximize ascends: g = -grad; buf = 0.5 buf + 0.5 g stays -grad, p += 0.1 grad each step.
  expect_steps(run([](TensorList p) {
                 return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.1).momentum(0.5).dampening(0.5).maximize(true));
               }),
               {{1.05, -1.9}, {1.1, -1.8}, {1.15, -1.7}});
}

TEST(Adam, MatchesPyTorch) {
  // Step 1: m = 0.1 g, v = 0.001 g^2; m_hat = g, v_hat = g^2: p -= 0.1 g / (|g| + eps) ~ 0.1 sign(g)
  expect_steps(run([](TensorList p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.1)); }),
               {{0.900000002, -2.099999999}, {0.800000004, -2.199999998}, {0.700000006, -2.299999997}});
  expect_steps(run([](TensorList p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.1).weight_decay(0.1).amsgrad(true)); }),
               {{0.900000001667, -2.09999999875}, {0.800047340488, -2.199965233316}, {0.700174574814, -2.299872009451}});
}

TEST(AdamW, DecouplesWeightDecay) {
  // Step 1: p *= 1 - 0.1 * 0.01 first: [0.999, -1.998], then the Adam step of ~0.1 sign(g).
  expect_steps(run([](TensorList p) { return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.1)); }),
               {{0.899000002, -2.097999999}, {0.798101003998, -2.195901998001}, {0.697302904994, -2.293706095003}});
}

TEST(RMSprop, PlainAndCenteredWithMomentum) {
  // Step 1: sq = 0.01 g^2, avg = 0.1 |g| (+eps): p -= 0.01 g / (0.1 |g|) = 0.1 sign(g)
  expect_steps(run([](TensorList p) { return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01)); }),
               {{0.90000002, -2.09999999}, {0.829111909549, -2.170888105476}, {0.771087007807, -2.228913010585}});
  expect_steps(run([](TensorList p) {
                 return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01).momentum(0.9).centered(true).weight_decay(0.1));
               }),
               {{0.899496235309, -2.1005037689}, {0.738043036413, -2.262109502711}, {0.535244398724, -2.465405859178}});
}

TEST(Optimizer, ParamGroupsAndErrors) {
  Tensor a = ones({1}, requires_grad()), b = ones({1}, requires_grad());
  optim::SGD opt({a}, optim::SGDOptions(0.1));
  opt.add_param_group({b}, optim::SGDOptions(1.0));
  (a + b).sum().backward();
  opt.step();
  EXPECT_TRUE(values_near(a, {0.9}));
  EXPECT_TRUE(values_near(b, {0.0}));
  EXPECT_ERROR(opt.add_param_group({a}, optim::SGDOptions(0.1)), "some parameters appear in more than one parameter group");
  EXPECT_ERROR(optim::SGD({a * 2}, optim::SGDOptions(0.1)), "can't optimize a non-leaf Tensor");
  EXPECT_ERROR(optim::Adam({ones({1}, requires_grad())}, optim::AdamOptions(0.1).betas({1.0, 0.9})), "Invalid beta parameter at index 0");
}

TEST(Optimizer, StateDictRoundTrip) {
  Tensor p = ones({2}, requires_grad());
  optim::Adam opt({p}, optim::AdamOptions(0.1));
  p.sum().backward();
  opt.step();
  StateDict saved = opt.state_dict();
  EXPECT_TRUE(saved.contains("state.0.exp_avg"));
  Tensor q = ones({2}, requires_grad());
  optim::Adam other({q}, optim::AdamOptions(0.5));
  other.load_state_dict(saved);
  EXPECT_EQ(other.param_groups()[0].options->lr, 0.1);
  EXPECT_EQ(other.state(0, 0).step, 1);
  EXPECT_EQ(values(other.state(0, 0).buffers.at("exp_avg")), values(opt.state(0, 0).buffers.at("exp_avg")));
}

namespace {
std::vector<double> lrs(const std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>& make, int n) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(1.0).momentum(0.9));
  auto s = make(opt);
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(opt.param_groups()[0].options->lr);
    opt.step();
    s->step();
  }
  return out;
}
void expect_lrs(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-9) << "epoch " << i;
}
}  // namespace

TEST(Schedulers, MatchPyTorch) {
  using namespace optim;
  expect_lrs(lrs([](Optimizer& o) { return std::make_unique<StepLR>(o, 3, 0.5); }, 8), {1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25});
  expect_lrs(lrs([](Optimizer& o) { return std::make_unique<MultiStepLR>(o, std::vector<std::int64_t>{2, 5}, 0.1); }, 8),
             {1, 1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01});
  expect_lrs(lrs([](Optimizer& o) { return std::make_unique<ExponentialLR>(o, 0.9); }, 4), {1, 0.9, 0.81, 0.729});
  // eta_min + (1 - eta_min)(1 + cos(pi t / 4)) / 2 with eta_min 0.1: t = 1 -> 0.1 + 0.9 * 0.853553 = 0.868198
  expect_lrs(lrs([](Optimizer& o) { return std::make_unique<CosineAnnealingLR>(o, 4, 0.1); }, 8),
             {1.0, 0.8681980515, 0.55, 0.2318019485, 0.1, 0.2318019485, 0.55, 0.8681980515});
  expect_lrs(lrs([](Optimizer& o) { return std::make_unique<LinearLR>(o, 0.25, 1.0, 4); }, 6), {0.25, 0.4375, 0.625, 0.8125, 1, 1});
  expect_lrs(lrs([](Optimizer& o) { return std::make_unique<OneCycleLR>(o, 1.0, 10); }, 10),
             {0.04, 0.52, 1.0, 0.950484632, 0.8117456539, 0.6112620219, 0.3887419781, 0.1882583461, 0.049519368, 4e-06});
}

TEST(Schedulers, OneCycleCyclesMomentumAndStopsAtTotalSteps) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(1.0).momentum(0.9));
  optim::OneCycleLR sched(opt, 1.0, 10);
  const std::vector<double> want{0.95, 0.9, 0.85, 0.8549515566, 0.8688255099, 0.8888739533, 0.9111260467, 0.9311744901,
                                 0.9450484434, 0.95};
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(static_cast<const optim::SGDOptions&>(*opt.param_groups()[0].options).momentum_, want[static_cast<std::size_t>(i)], 1e-9);
    if (i < 9) sched.step();
  }
  sched.step();  // step 10 is the last allowed
  EXPECT_ERROR(sched.step(), "Tried to step 11 times. The specified number of total steps is 10");
}

TEST(Schedulers, ReduceLROnPlateau) {
  Tensor p = zeros({1}, requires_grad());
  optim::SGD opt({p}, optim::SGDOptions(1.0));
  optim::ReduceLROnPlateau sched(opt, {.factor = 0.5, .patience = 2});
  std::vector<double> got;
  for (double metric : {5, 4, 4, 4, 4, 3, 3, 3, 3}) {
    sched.step(metric);
    got.push_back(sched.get_last_lr()[0]);
  }
  expect_lrs(got, {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25});
}

TEST(ClipGrad, NormAndValue) {
  Tensor a = zeros({2}, requires_grad()), b = zeros({1}, requires_grad());
  a.mutable_grad() = tensor({3.0f, 0.0f});
  b.mutable_grad() = tensor({4.0f});
  // total norm 5; coefficient 1 / (5 + 1e-6)
  Tensor total = optim::clip_grad_norm_({a, b}, 1.0);
  EXPECT_NEAR(total.item<double>(), 5.0, 1e-6);
  EXPECT_TRUE(values_near(a.grad(), {0.6, 0}, 1e-5));
  EXPECT_TRUE(values_near(b.grad(), {0.8}, 1e-5));
  optim::clip_grad_value_({a, b}, 0.7);
  EXPECT_TRUE(values_near(b.grad(), {0.7}, 1e-6));
  b.mutable_grad() = tensor({INFINITY});
  EXPECT_ERROR(optim::clip_grad_norm_({a, b}, 1.0, 2.0, true), "The total norm of order 2 for gradients from `parameters` is non-finite");
}

TEST(Adam, FusedKernelMatchesTheCompositeRule) {
  // Contiguous parameters take the fused one-pass kernel; a transposed (non-contiguous)
  // parameter takes the composite rule. Both must produce the same numbers.
  for (bool decoupled : {false, true}) {
    for (bool amsgrad : {false, true}) {
      manual_seed(3);
      Tensor base = randn({3, 4}, kFloat64);
      Tensor fused = base.clone().as_leaf(true);
      Tensor strided = base.t().contiguous().t().as_leaf(true);  // same values, column-major
      ASSERT_FALSE(strided.is_contiguous());
      auto make = [&](Tensor p) -> std::unique_ptr<optim::Optimizer> {
        if (decoupled) return std::make_unique<optim::AdamW>(TensorList{p}, optim::AdamWOptions(0.05));
        return std::make_unique<optim::Adam>(TensorList{p}, optim::AdamOptions(0.05).weight_decay(0.1).amsgrad(amsgrad));
      };
      auto a = make(fused), b = make(strided);
      for (int step = 0; step < 4; ++step) {
        for (auto* pair : {&a, &b}) {
          Tensor& p = (*pair == a) ? fused : strided;
          (*pair)->zero_grad();
          (p * p * p).sum().backward();
          (*pair)->step();
        }
      }
      EXPECT_TRUE(kiln::testing::tensors_near(fused, strided, 1e-12)) << "decoupled " << decoupled << " amsgrad " << amsgrad;
    }
  }
}

TEST(SGD, FusedKernelMatchesTheCompositeRule) {
  // As for Adam: the contiguous parameter takes core/cpu/sgd.cpp, the transposed one the
  // composite rule, through every option that changes the arithmetic.
  struct Case {
    const char* name;
    optim::SGDOptions options;
  };
  const std::vector<Case> cases{
      {"plain", optim::SGDOptions(0.05)},
      {"weight decay, maximize", optim::SGDOptions(0.05).weight_decay(0.1).maximize(true)},
      {"momentum, dampening", optim::SGDOptions(0.05).momentum(0.9).dampening(0.3)},
      {"nesterov, weight decay", optim::SGDOptions(0.05).momentum(0.8).nesterov(true).weight_decay(0.01)}};
  for (const Case& c : cases) {
    manual_seed(5);
    Tensor base = randn({3, 4}, kFloat64);
    Tensor fused = base.clone().as_leaf(true);
    Tensor strided = base.t().contiguous().t().as_leaf(true);
    ASSERT_FALSE(strided.is_contiguous());
    optim::SGD a(TensorList{fused}, c.options), b(TensorList{strided}, c.options);
    for (int step = 0; step < 4; ++step) {
      for (auto [opt, p] : {std::pair<optim::SGD*, Tensor*>{&a, &fused}, {&b, &strided}}) {
        opt->zero_grad();
        (*p * *p * *p).sum().backward();
        opt->step();
      }
    }
    EXPECT_TRUE(kiln::testing::tensors_near(fused, strided, 1e-14)) << c.name;
    EXPECT_FALSE(kiln::testing::tensors_near(fused, base, 1e-3)) << c.name << ": the steps moved nothing";
  }
}

TEST(FusedOptimizerSteps, AnUndefinedGradientIsAnErrorNotACrash) {
  const Tensor p = zeros({3}), buffer = zeros({3});
  EXPECT_FALSE(ops::can_fuse_sgd(p, Tensor(), buffer));
  EXPECT_FALSE(ops::can_fuse_adam(p, Tensor(), zeros({3}), zeros({3})));
  EXPECT_ERROR(ops::sgd_step_(p, Tensor(), buffer, SgdStep{}), "sgd_step_: param, grad and momentum buffer");
}
