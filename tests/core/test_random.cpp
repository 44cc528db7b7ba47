// tests/core/test_random.cpp — the random streams reproduce PyTorch 1.13's CPU values
// (Note [Random streams]); reference values were printed by PyTorch with the same seeds.
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values_near;

TEST(Random, RandMatchesPyTorch) {
  manual_seed(0);
  // torch.manual_seed(0); torch.rand(5)
  EXPECT_TRUE(values_near(rand({5}), {0.49625658988952637, 0.7682217955589294, 0.08847743272781372,
                                      0.13203048706054688, 0.30742281675338745}, 1e-7));
  manual_seed(0);
  // torch.rand(3, dtype=torch.float64): 53 random bits from two draws
  EXPECT_TRUE(values_near(rand({3}, kFloat64), {0.9700530018065531, 0.707819864399788, 0.45938294312745087}, 1e-15));
}

TEST(Random, RandnMatchesPyTorch) {
  manual_seed(0);
  // Fewer than 16 elements: Box-Muller in double with a cached second value.
  EXPECT_TRUE(values_near(randn({3}), {1.5409960746765137, -0.293428897857666, -2.1787893772125244}, 1e-6));
  manual_seed(0);
  // 16 or more: uniforms first, then Box-Muller in blocks of 16.
  EXPECT_TRUE(values_near(randn({20}),
                          {-1.1258398294448853, -1.152360200881958, -0.2505785822868347, -0.4338788092136383,
                           0.5988394618034363, -1.5550950765609741, -0.3413603901863098, 1.85300612449646,
                           0.46809640526771545, -0.1577124446630478, 1.4436601400375366, 0.26604941487312317,
                           1.3893661499023438, 1.586334228515625, 0.946298360824585, -0.843676745891571,
                           0.9318265914916992, 1.2590092420578003, 2.0049805641174316, 0.05373690277338028},
                          1e-5));
  manual_seed(0);
  // A ragged tail recomputes the last 16 from fresh draws.
  EXPECT_TRUE(values_near(randn({17}),
                          {-1.1258398294448853, -1.6959311962127686, 0.5666506290435791, 0.7935083508491516,
                           0.5988394618034363, -1.5550950765609741, -0.3413603901863098, 1.85300612449646,
                           0.46809640526771545, -0.5854975581169128, -0.1733967512845993, 0.18347793817520142,
                           1.3893661499023438, 1.586334228515625, 0.946298360824585, -0.843676745891571,
                           0.9318265914916992},
                          1e-5));
}

TEST(Random, RandintUniformDropoutMatchPyTorch) {
  manual_seed(0);
  Tensor r = randint(0, 10, {5});
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_TRUE(values_near(r, {4, 9, 3, 0, 3}, 0));
  manual_seed(42);
  Tensor u = empty({4});
  u.uniform_(-2, 2);
  EXPECT_TRUE(values_near(u, {1.5290770530700684, 1.6600158214569092, -0.46854496002197266, 1.8372225761413574}, 1e-6));
  manual_seed(0);
  EXPECT_TRUE(values_near(dropout(ones({8}), 0.5), {0, 0, 2, 0, 0, 0, 2, 2}, 0));
}

TEST(Random, SameSeedSameStreamWhateverTheThreadCount) {
  manual_seed(7);
  const auto a = kiln::testing::values(randn({100000}));
  set_num_threads(1);
  manual_seed(7);
  const auto b = kiln::testing::values(randn({100000}));
  set_num_threads(2);
  EXPECT_EQ(a, b);
}

TEST(Random, NonContiguousFillDrawsInElementOrder) {
  manual_seed(3);
  const auto expected = kiln::testing::values(rand({4, 3}));
  manual_seed(3);
  Tensor t = empty({3, 4}).t();  // non-contiguous [4, 3]
  t.uniform_();
  EXPECT_TRUE(values_near(t, expected, 0));
}

TEST(Random, ArgumentErrors) {
  EXPECT_ERROR(randint(5, 5, {2}), "random_ expects 'from' to be less than 'to'");
  Tensor t = empty({2});
  EXPECT_ERROR(t.normal_(0, -1), "normal expects std >= 0.0");
  EXPECT_ERROR(t.uniform_(1, 0), "uniform_ expects to return a [from, to) range");
}

// A generator state restores the exact stream: every kind of draw (uniform floats, the
// blocked normal fill, the Box-Muller cache of short normal fills, integers, dropout) repeats
// after set_rng_state, which is what lets a resumed training run draw the same dropout masks.
TEST(Random, StateRoundTripRepeatsEveryKindOfDraw) {
  manual_seed(2024);
  (void)randn({3});  // leaves the second value of a Box-Muller pair cached
  const Tensor state = get_rng_state();
  EXPECT_EQ(state.dtype(), kUInt8);
  EXPECT_EQ(state.dim(), 1);
  auto draw = [] {
    return std::vector<Tensor>{rand({5}), randn({1}), randn({20}), randint(0, 1000, {6}), rand({4}, kFloat64),
                               dropout(ones({64}), 0.5, true)};
  };
  const std::vector<Tensor> first = draw();
  manual_seed(7);  // move the stream elsewhere
  (void)rand({100});
  set_rng_state(state);
  const std::vector<Tensor> again = draw();
  for (std::size_t i = 0; i < first.size(); ++i) EXPECT_TRUE(equal(first[i], again[i])) << "draw " << i;
  EXPECT_EQ(initial_seed(), 2024u);  // the seed is part of the state
}

TEST(Random, SetRngStateRefusesAnythingElse) {
  EXPECT_ERROR(set_rng_state(zeros({4})), "set_rng_state: expected a 1-D kiln.uint8 tensor saved by get_rng_state(), got kiln.float32 of shape [4]");
  EXPECT_ERROR(set_rng_state(zeros({8}, kUInt8)), "is not a generator state saved by get_rng_state()");
  // A truncated state: the engine's words are cut short.
  const Tensor state = get_rng_state();
  EXPECT_ERROR(set_rng_state(state.slice(0, 0, state.numel() / 2)), "is not a generator state");
  if (!cuda::is_built()) {
    EXPECT_ERROR(cuda::get_rng_state(), "not compiled with CUDA");
  }
}
