// tests/core/test_reduce_accuracy.cpp — Float32 (and half) reductions against the same sums
// in Float64, with bounds that follow from how Kiln sums (Note [How Kiln sums] in
// core/cpu/cascade_sum.h): at most (kSumBlock - 1) roundings of the block tier, a negligible
// double cascade, and one rounding to the output, relative to the sum of magnitudes.
// Each layout of Note [Reduction layouts] gets a case that one float accumulator gets badly
// wrong, so a layout that stops using the cascade fails here.
// Read next: tests/nn/test_float32_training.cpp (the same accuracy over a training run).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu/cascade_sum.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

namespace {

constexpr double kEps32 = std::numeric_limits<float>::epsilon() / 2;  // unit roundoff, 2^-24

/// The bound of Note [How Kiln sums] for Float32: the block tier's roundings, the output's
/// rounding, and one more unit for the Float64 reference and the double cascade.
constexpr double kSumBound = (cpu::kSumBlock + 1) * kEps32;

/// max |a - b| / max |b| over the elements.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  EXPECT_EQ(x.size(), y.size());
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return worst / scale;
}

/// One unit in the last place of the floats near `v`.
double ulp32(double v) { return std::ldexp(1.0, std::ilogb(v) - 23); }

/// The exact statistics of each column of a [rows, cols] tensor, in long double (64-bit
/// significands: exact enough to judge a Float32 result's last bit), independent of Kiln.
struct ColumnStats {
  std::vector<double> sum, mean, var;  // var unbiased (N - 1)
};
ColumnStats exact_column_stats(const Tensor& x) {
  const std::int64_t rows = x.size(0), cols = x.size(1);
  const std::vector<double> v = values(x);
  ColumnStats out;
  for (std::int64_t c = 0; c < cols; ++c) {
    long double sum = 0, squares = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += v[static_cast<std::size_t>(r * cols + c)];
    const long double mean = sum / rows;
    for (std::int64_t r = 0; r < rows; ++r) {
      const long double d = v[static_cast<std::size_t>(r * cols + c)] - mean;
      squares += d * d;
    }
    out.sum.push_back(static_cast<double>(sum));
    out.mean.push_back(static_cast<double>(mean));
    out.var.push_back(static_cast<double>(squares / (rows - 1)));
  }
  return out;
}

/// |result - exact| in ulps of the floats near `exact`, for every element.
std::vector<double> ulps_off(const Tensor& result, const std::vector<double>& exact) {
  const std::vector<double> r = values(result);
  EXPECT_EQ(r.size(), exact.size());
  std::vector<double> out;
  for (std::size_t i = 0; i < r.size() && i < exact.size(); ++i) out.push_back(std::abs(r[i] - exact[i]) / ulp32(exact[i]));
  return out;
}

/// A Float32 tensor of `sizes` whose first element is 1 and every other 2^-25: one float
/// accumulator adding them in order never moves from 1 (each addend is half an ulp of 1 and
/// rounds away), while the true sum is 1 + (n - 1)·2^-25.
Tensor one_then_tiny(IntArrayRef sizes) {
  Tensor t = full(sizes, std::ldexp(1.0, -25));
  t.view({-1}).narrow(0, 0, 1).fill_(1.0);
  return t;
}

}  // namespace

TEST(ReduceAccuracy, SumOfTenMillionUniformValuesIsWithinTheCascadeBound) {
  manual_seed(0);
  const Tensor x = rand({10'000'000});
  const double exact = values(x.to(kFloat64).sum())[0];
  const double kiln = values(x.sum())[0];
  // Σ|x| = the sum here (all positive).
  EXPECT_LE(std::abs(kiln - exact) / exact, kSumBound);
  // And in practice it is the Float64 sum rounded once: within half an ulp plus a hair.
  EXPECT_LE(std::abs(kiln - exact), 0.51 * ulp32(exact));
}

TEST(ReduceAccuracy, OneFloatAccumulatorLosesWhatTheCascadeKeeps) {
  const std::int64_t n = 1 << 20;
  const Tensor x = one_then_tiny({n});
  const double exact = 1.0 + static_cast<double>(n - 1) * std::ldexp(1.0, -25);
  float serial = 0;
  for (double v : values(x)) serial += static_cast<float>(v);
  EXPECT_EQ(serial, 1.0f);  // the naive loop loses 3 % of the sum
  EXPECT_LE(std::abs(values(x.sum())[0] - exact) / exact, kSumBound);
}

// Each layout of Note [Reduction layouts], with the hard case in every output.
TEST(ReduceAccuracy, EveryLayoutSumsWithinTheCascadeBound) {
  struct Case {
    const char* layout;
    Tensor input;
    Shape dims;
  };
  const std::int64_t n = 1 << 16;
  auto hard_columns = [&](std::int64_t k) {
    Tensor t = full({n, k}, std::ldexp(1.0, -25));
    t.narrow(0, 0, 1).fill_(1.0);
    return t;
  };
  Tensor images = full({256, 3, 16, 16}, std::ldexp(1.0, -25));
  images.narrow(0, 0, 1).narrow(2, 0, 1).narrow(3, 0, 1).fill_(1.0);
  // Layout B's blocks of a middle dim, each starting with its own 1.
  auto hard_blocks = [&](std::int64_t blocks, std::int64_t k) {
    Tensor t = full({blocks, n / blocks + 1, k}, std::ldexp(1.0, -25));
    t.narrow(1, 0, 1).fill_(1.0);
    return t;
  };
  const Case cases[] = {
      {"A: contiguous blocks (last dim)", one_then_tiny({n}).expand({3, n}).contiguous(), {1}},
      {"B: reduced dims first", hard_columns(5), {0}},
      {"B, wide: many column tiles", hard_columns(200), {0}},
      {"B, narrow: 2 columns, 32 rows to a row of lanes", hard_columns(2), {0}},
      {"B, narrow: 16 columns, a partial row of lanes at the end", hard_columns(16).narrow(0, 0, n - 3).contiguous(),
       {0}},
      {"B: the middle dim of [8, R, 2]", hard_blocks(8, 2), {1}},
      {"B: the middle dim of [4, R, 100] (tiles)", hard_blocks(4, 100), {1}},
      {"C: dense runs of H*W (batch norm)", images, {0, 2, 3}},
      {"C: short runs, packed first", hard_columns(6).view({n, 3, 2}), {0, 2}},
      {"A over a transposed view (packed)", hard_columns(4).t(), {1}},
  };
  for (const Case& c : cases) {
    const Tensor expected = c.input.to(kFloat64).sum(c.dims);
    EXPECT_LE(relative_error(c.input.sum(c.dims), expected), kSumBound) << c.layout;
  }
}

TEST(ReduceAccuracy, RowMeansOfLongRows) {
  manual_seed(1);
  const Tensor x = rand({4, 1'000'000});
  const std::vector<double> kiln = values(x.mean({1})), exact = values(x.to(kFloat64).mean({1}));
  for (std::size_t i = 0; i < exact.size(); ++i) {
    EXPECT_LE(std::abs(kiln[i] - exact[i]) / exact[i], kSumBound + kEps32);
    // mean = sum / n, rounded twice; the sum itself is as good as the Float64 sum rounded.
    EXPECT_LE(std::abs(kiln[i] - exact[i]), 1.01 * ulp32(exact[i]));
  }
}

TEST(ReduceAccuracy, VarianceOfOffsetDataIsTwoPass) {
  // mean 1000, std 1: E[x²] - E[x]² would cancel 6 digits; two passes center first, and the
  // centering is exact (Sterbenz) for values this close to their mean. What is left: the
  // rounded mean's square, the squares' roundings and the sum's bound.
  manual_seed(2);
  const Tensor x = randn({1'000'000}) + 1000.0;
  const double rel = relative_error(x.var({0}, true), x.to(kFloat64).var({0}, true));
  EXPECT_LE(rel, kSumBound + 2 * kEps32);
  EXPECT_LE(relative_error(x.std({0}, true), x.to(kFloat64).std({0}, true)), kSumBound + 2 * kEps32);
}

TEST(ReduceAccuracy, StatisticsOverTheOuterDimOfANarrowTensorRoundOnce) {
  // The held-out probe of issue 32: [1e6, 2] of mean 1000 and std 1 reduced over dim 0, whose
  // stride is 2 (layout B). Each result should be the exact value rounded once: within half an
  // ulp (a hair more for sum and mean, whose float block tier errs ~1e-10). mean and var used
  // to round twice (the sum to Float32, then the quotient), and var's float tier added squares
  // of values on a 2^-14 grid with a bias (Note [How Kiln sums]). Any seed should pass; this
  // one was picked because the old code failed it: its mean was 0.76 ulp off in one column,
  // its var 0.74 and 0.60 ulp off.
  manual_seed(46);
  const Tensor x = randn({1'000'000, 2}) + 1000.0;
  const ColumnStats exact = exact_column_stats(x);
  for (double e : ulps_off(x.sum({0}), exact.sum)) EXPECT_LE(e, 0.51);
  for (double e : ulps_off(x.mean({0}), exact.mean)) EXPECT_LE(e, 0.51);
  for (double e : ulps_off(x.var({0}, true), exact.var)) EXPECT_LE(e, 0.5 + 1e-6);
  // std is the square root of the correctly rounded var: one more rounding.
  std::vector<double> exact_std;
  for (double v : exact.var) exact_std.push_back(std::sqrt(v));
  for (double e : ulps_off(x.std({0}, true), exact_std)) EXPECT_LE(e, 1.0);
}

TEST(ReduceAccuracy, VarianceIsCorrectlyRoundedInEveryLayout) {
  // Data near 10^4 sit on a grid of 2^-10: their squared deviations carry few low bits, and a
  // float block tier rounds them with a bias of ~2e-7 (three ulps of var; Note [How Kiln
  // sums]). var adds them in double, so every layout gives the exact value rounded once.
  manual_seed(33);
  const std::int64_t n = 1 << 16;
  const Tensor columns = randn({n, 4}) + 10000.0, wide = randn({n / 8 + 3, 40}) + 10000.0;
  const ColumnStats exact = exact_column_stats(columns), exact_wide = exact_column_stats(wide);
  struct Case {
    const char* layout;
    Tensor input;
    Shape dims;
    const std::vector<double>* expected;  // in the output's order
  };
  const Case cases[] = {
      {"A: one contiguous block per output", columns.t().contiguous(), {1}, &exact.var},
      {"A: contiguous blocks, outputs n apart", columns.t().contiguous().t(), {0}, &exact.var},
      {"B: reduced dim first, narrow (lanes hold 8 or 16 rows)", columns, {0}, &exact.var},
      {"B: reduced dim first, 40 columns (tiles)", wide, {0}, &exact_wide.var},
      {"B: the middle dim of [2, n, 2]", columns.view({n, 2, 2}).permute({1, 0, 2}).contiguous(), {1}, &exact.var},
      {"C: dense runs of n / 64", columns.t().contiguous().view({4, 64, n / 64}).transpose(0, 1), {0, 2},
       &exact.var},
      {"C: a transposed view, packed first", columns.t(), {1}, &exact.var},
  };
  for (const Case& c : cases) {
    const std::vector<double> off = ulps_off(c.input.var(c.dims, true), *c.expected);
    for (double e : off) EXPECT_LE(e, 0.5 + 1e-6) << c.layout;
  }
  // The CPU batch-norm kernel takes both statistics from the same kernel. With momentum 1
  // the running variance becomes var·N/(N - 1): the correctly rounded biased var times the
  // Float32 factor, so within 1.5 ulps of the exact unbiased var (it was 3 off).
  const Tensor running_mean = zeros({4}), running_var = zeros({4});
  const auto [y, save_mean, save_invstd] =
      native_batch_norm(columns, ones({4}), zeros({4}), running_mean, running_var, true, /*momentum=*/1.0, 1e-5);
  for (double e : ulps_off(save_mean, exact.mean)) EXPECT_LE(e, 0.51);
  for (double e : ulps_off(running_var, exact.var)) EXPECT_LE(e, 1.5);
}

TEST(ReduceAccuracy, StatisticsOverAnOuterDimDoNotDependOnTheThreadCount) {
  manual_seed(34);
  const Tensor narrow = randn({1'000'003, 2}) + 1000.0, middle = randn({300, 1000, 2}) + 1000.0;
  auto all = [&] {
    std::vector<double> out;
    for (const Tensor& t : {narrow.sum({0}), narrow.mean({0}), narrow.var({0}, true), middle.sum({1}),
                            middle.var({1}, true), middle.mean({0, 1})}) {
      for (double v : values(t)) out.push_back(v);
    }
    return out;
  };
  const int threads = get_num_threads();
  set_num_threads(1);
  const std::vector<double> one = all();
  set_num_threads(2);
  const std::vector<double> two = all();
  set_num_threads(threads);
  EXPECT_EQ(one, two);  // bit for bit
}

TEST(ReduceAccuracy, HalfTypesAccumulateInFloat) {
  // 4096 ones: BFloat16 holds 4096 exactly, but a BFloat16 accumulator stops at 256
  // (256 + 1 rounds back to 256 with 8 significant bits); Float16 stops at 2048.
  for (DType t : {kBFloat16, kFloat16}) {
    EXPECT_EQ(values(ones({4096}, TensorOptions().dtype(t)).sum())[0], 4096.0) << scalar_type_name(t);
    EXPECT_EQ(values(ones({4096, 3}, TensorOptions().dtype(t)).sum({0}))[0], 4096.0) << scalar_type_name(t);
  }
}

TEST(ReduceAccuracy, Float64SumsAreBoundedIndependentlyOfLength) {
  const std::int64_t n = 1 << 20;
  Tensor x = full({n}, std::ldexp(1.0, -54), TensorOptions().dtype(kFloat64));
  x.narrow(0, 0, 1).fill_(1.0);
  const double exact = 1.0 + static_cast<double>(n - 1) * std::ldexp(1.0, -54);
  const double eps64 = std::numeric_limits<double>::epsilon() / 2;
  EXPECT_LE(std::abs(values(x.sum())[0] - exact) / exact, (cpu::kSumBlock + 8) * eps64);
}

TEST(ReduceAccuracy, SoftmaxAndLayerNormOverWideRows) {
  manual_seed(3);
  const Tensor logits = randn({64, 4096}) * 4.0;
  const Tensor p = logits.softmax(1), p64 = logits.to(kFloat64).softmax(1);
  // exp rounds each term (ε), the sum is within its bound, the division rounds once.
  EXPECT_LE(relative_error(p, p64), kSumBound + 4 * kEps32);
  EXPECT_LE(relative_error(logits.log_softmax(1), logits.to(kFloat64).log_softmax(1)), kSumBound + 4 * kEps32);

  const Tensor h = randn({64, 4096}) * 0.5 + 50.0;
  const Tensor y = layer_norm(h, {4096}), y64 = layer_norm(h.to(kFloat64), {4096});
  // The centred values are exact; the statistics carry the sum's bound, scaled by the
  // ratio of the data's magnitude to its spread (50 / 0.5) through the rounded mean.
  EXPECT_LE(relative_error(y, y64), 100 * (kSumBound + 4 * kEps32));
}

TEST(ReduceAccuracy, SumToOfABroadcastGradient) {
  // The gradient of a bias broadcast over a million rows is a sum over them (sum_to); each
  // row contributes 0.1f, which one float accumulator would add with ~1e-3 relative error.
  const Tensor bias = zeros({4}, requires_grad());
  ((zeros({1'000'000, 4}) + bias) * 0.1).sum().backward();
  const double exact = 1e6 * static_cast<double>(0.1f);
  EXPECT_LE(relative_error(bias.grad(), full({4}, exact, TensorOptions().dtype(kFloat64))), kSumBound);
}

TEST(ReduceAccuracy, ASumDoesNotDependOnTheThreadCount) {
  manual_seed(5);
  const Tensor x = rand({1'000'003}), images = rand({64, 3, 40, 40});
  const int threads = get_num_threads();
  set_num_threads(1);
  const double one = values(x.sum())[0];
  const std::vector<double> one_per_channel = values(images.sum({0, 2, 3}));
  set_num_threads(2);
  const double two = values(x.sum())[0];
  const std::vector<double> two_per_channel = values(images.sum({0, 2, 3}));
  set_num_threads(threads);
  EXPECT_EQ(one, two);  // bit for bit
  EXPECT_EQ(one_per_channel, two_per_channel);
}

namespace {

/// Values<T> under another name: sum_contiguous takes its general path (lanes in memory) for it.
template <class T>
struct SameValuesOtherName {
  using Block = T;
  T operator()(T v, std::int64_t /*lane*/) const { return v; }
};

/// Whether the register path of whole short rows gives the memory path's bits for n values.
template <class T>
void expect_register_and_memory_sums_agree(const std::vector<T>& data, std::int64_t n) {
  for (std::int64_t start = 0; start + n <= static_cast<std::int64_t>(data.size()); start += n) {
    const double fast = cpu::sum_contiguous(data.data() + start, n);
    const double general = cpu::sum_contiguous(data.data() + start, n, SameValuesOtherName<T>{});
    EXPECT_EQ(std::bit_cast<std::uint64_t>(fast), std::bit_cast<std::uint64_t>(general))
        << "n = " << n << " from " << start << ": " << fast << " vs " << general;
  }
}

template <class T>
void expect_short_rows_sum_in_registers_as_in_memory() {
  std::mt19937 gen(11);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> exponent(-30, 30);
  std::vector<T> data(1 << 16);
  // Magnitudes over 60 binades, so that the order of every addition shows in the result.
  for (T& v : data) v = static_cast<T>(std::ldexp(normal(gen), exponent(gen)));
  constexpr std::int64_t L = cpu::kLanesOf<T>;
  for (std::int64_t n : {L, 2 * L, 3 * L, 31 * L, 32 * L, 33 * L}) expect_register_and_memory_sums_agree(data, n);
  // Rows of -0.0, and rows holding infinities and a NaN.
  std::vector<T> special(static_cast<std::size_t>(4 * L), T(-0.0));
  special[static_cast<std::size_t>(L + 3)] = std::numeric_limits<T>::infinity();
  special[static_cast<std::size_t>(2 * L + 5)] = std::numeric_limits<T>::infinity();
  special[static_cast<std::size_t>(2 * L + 6)] = -std::numeric_limits<T>::infinity();
  special[static_cast<std::size_t>(3 * L + 7)] = std::numeric_limits<T>::quiet_NaN();
  expect_register_and_memory_sums_agree(special, L);
  EXPECT_TRUE(std::signbit(cpu::sum_contiguous(special.data(), L)) ==
              std::signbit(cpu::sum_contiguous(special.data(), L, SameValuesOtherName<T>{})));
}

}  // namespace

// A softmax or layer-norm row whose length is a whole number of lane rows is summed in
// registers (detail::sum_whole_rows_in_one_block); the additions must be the memory path's.
TEST(ReduceAccuracy, ShortRowsSumInRegistersBitForBitAsInMemory) {
  expect_short_rows_sum_in_registers_as_in_memory<float>();
  expect_short_rows_sum_in_registers_as_in_memory<double>();
}
