// core/cpu/cascade_sum.h — how the CPU adds floating-point numbers: every floating sum in Kiln
// (sum, mean, var, norms, softmax denominators, the statistics of the norm layers, sum_to,
// loss reductions) ends in these two functions (Note [How Kiln sums]).
// Read next: core/cpu/reduce.cpp (which layouts call which).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/cpu/block_lanes.h"
#include "core/half.h"

namespace kiln::cpu {

// Note [How Kiln sums]
// ~~~~~~~~~~~~~~~~~~~~
// Adding n values one after another into one float accumulator errs by up to (n - 1)·u·Σ|x|
// (u = 2^-24, the unit roundoff of Float32): the rounding error of every partial sum lands in
// the result, and the partial sums grow, so late additions lose most of their bits. A sum of
// 1e7 uniform values done that way is off by ~1e-4 relatively; split over a few SIMD
// accumulators, by ~5e-6. Kiln adds in two tiers instead:
//
//  1. Lanes and blocks, in the input's math type (float for Float32 and the half types,
//     double for Float64). The values are read as rows of kSumLanes<T> side-by-side lanes (a
//     contiguous run is cut into rows; a reduction over the leading dim of [R, K] reads whole
//     rows of K). Each lane adds kSumBlock = 32 rows: vector adds with no dependency between
//     lanes, as fast as the plain loop.
//  2. A cascade of levels in double (`WideSum`). Each block's lane sums are added into level
//     0; when a level has taken kSumBlock sums it is added into the next one and emptied, so
//     no accumulator ever takes more than kSumBlock additions before it is passed on. The
//     lanes are added pairwise at the end, and the result is rounded once to the output's
//     dtype. A mean (and var, the mean of centred squares) divides the double by its count
//     before that rounding: a sum rounded to Float32 and then divided rounds twice, which
//     errs up to a whole ulp where one rounding errs half of one.
//
// Error bound, relative to Σ|x_i|: (kSumBlock - 1)·u_T for the block tier, plus
// (kSumBlock - 1)·L·u_64 for the L levels, plus one rounding to the output: for Float32 about
// 32·u ≈ 1.9e-6 whatever n is, where one accumulator's bound grows as n·u. The bound is
// the worst case; the block tier's errors are usually independent and cancel, so on random
// data the result is in practice the exact sum rounded once: 3.8e-8 relative on 1e7 uniform values,
// equal to PyTorch's cascade_sum on the same data, and equal or better on every case of
// tools/accuracy_report (tests/core/test_reduce_accuracy.cpp checks the bound in every
// layout). Float64 sums get the same structure, which bounds their error by ~32·(1 + L)·u_64
// instead of letting it grow with n. The widening costs one conversion and add per lane
// every 32 rows; a sum of 1e7 floats stays memory-bound (tests/bench/bench_reduce).
//
// The errors cancel only when the terms' low bits look random. Squares of values on a coarse
// grid do not: Float32 data near 1000 sit on a grid of 2^-14, so their deviations from a
// Float32 mean are k·2^-14 and the squares k²·2^-28, whose low bits follow the residues of
// squares (every odd k² is 1 mod 8), and the float tier rounds one way more often than the
// other. Over 1e6 normal values of mean 1000 and std 1 the float tier's sum of squared
// deviations came out 6.1e-9 to 7.4e-9 too high in each of 16 columns (an eighth of an ulp
// of var, enough to round it the wrong way now and then); near 10^4 (a grid of 2^-10) it came
// out 2e-7 too low, three ulps. Full-precision squares of the same data err 4e-10. So var's
// second pass adds (x - mean)² in double lanes: a block term (what each element adds, below)
// that is all but exact before the cascade sees it (core/cpu/reduce.cpp, var_mean_kernel).
//
// A long sum is cut into pieces of contiguous rows, whose double partials are added in a
// fixed order; the pieces follow from the sizes alone, so a result does not depend on how
// many threads run it (PyTorch's do) nor on timing. The CUDA reductions keep a compensated (Kahan) sum per thread and
// add the threads' sums as a tree (core/cuda/reduce.cu).

/// The type a floating sum's block tier runs in (float for half types).
template <class T>
using BlockSum = OpMath<T>;
/// The cascade's type: double for every floating input.
using WideSum = double;

/// Lanes side by side in the block tier: 256 bytes of accumulators (8 AVX2 or 4 AVX-512
/// registers), enough independent adds to hide the add latency.
template <class B>
inline constexpr std::int64_t kLanesOf = 256 / static_cast<std::int64_t>(sizeof(B));
template <class T>
inline constexpr std::int64_t kSumLanes = kLanesOf<BlockSum<T>>;
inline constexpr std::int64_t kSumBlock = 32;

// Block terms: what the block tier adds for element v of lane j, and in which type (Block).

/// A sum's term: the value itself, in BlockSum<T>.
template <class T>
struct Values {
  using Block = BlockSum<T>;
  Block operator()(T v, std::int64_t /*lane*/) const { return to_op_math(v); }
};

/// The value in double: var's mean, whose error var squares (core/cpu/reduce.cpp).
template <class T>
struct WideValues {
  using Block = WideSum;
  WideSum operator()(T v, std::int64_t /*lane*/) const { return static_cast<WideSum>(to_op_math(v)); }
};

/// var's term: the squared deviation from a centre (the mean, kept in double), in double. One
/// centre for every lane: a contiguous run belongs to one output.
template <class T>
struct SquaredDeviations {
  using Block = WideSum;
  WideSum centre;
  WideSum operator()(T v, std::int64_t /*lane*/) const {
    const WideSum d = static_cast<WideSum>(to_op_math(v)) - centre;
    return d * d;
  }
};

/// The same with a centre per lane: lane j of a row of columns belongs to output j's column.
template <class T>
struct SquaredDeviationsPerLane {
  using Block = WideSum;
  const WideSum* centres;
  WideSum operator()(T v, std::int64_t lane) const {
    const WideSum d = static_cast<WideSum>(to_op_math(v)) - centres[lane];
    return d * d;
  }
};

namespace detail {

inline constexpr int kSumLevels = 8;  // 32^8 blocks before the top level adds serially

/// Level l of the cascade holds up to kSumBlock sums of level l - 1 (Note [How Kiln sums]). Levels
/// are written before they are read (counts_ says which hold something), so a short sum
/// clears nothing.
template <std::int64_t Width>
class SumCascade {
 public:
  /// Adds one block's lane sums (`width` of them) into level 0 and carries full levels up.
  template <class B>
  void add_block(const B* block, std::int64_t width) {
    add_into(0, block, width);
    for (int l = 0; l + 1 < kSumLevels && counts_[l] == kSumBlock; ++l) {
      add_into(l + 1, levels_[l].data(), width);
      counts_[l] = 0;
    }
  }
  /// out[j] (+)= the sum of lane j for j < width, smallest levels first; assigns when
  /// Accumulate is false.
  template <bool Accumulate>
  void finish(std::int64_t width, WideSum* out) const {
    if constexpr (!Accumulate) std::fill(out, out + width, WideSum(0));
    for (int l = 0; l < kSumLevels; ++l) {
      if (counts_[l] == 0) continue;
      for (std::int64_t j = 0; j < width; ++j) out[j] += levels_[l][j];
    }
  }

 private:
  template <class B>
  void add_into(int l, const B* v, std::int64_t width) {
    WideSum* level = levels_[l].data();
    if (counts_[l]++ == 0) {
      for (std::int64_t j = 0; j < width; ++j) level[j] = static_cast<WideSum>(v[j]);
    } else {
      for (std::int64_t j = 0; j < width; ++j) level[j] += static_cast<WideSum>(v[j]);
    }
  }

  std::array<std::array<WideSum, Width>, kSumLevels> levels_;
  std::array<std::int64_t, kSumLevels> counts_{};
};

/// The block tier for `rows` rows of `width` values (width ≤ Width), row r at p + r*stride,
/// each adding term(value, lane), summed into out[0..width) (or written there, when
/// Accumulate is false). Full is true when width == Width, so the lane loops have a
/// compile-time trip count.
template <bool Full, bool Accumulate, std::int64_t Width, class T, class Term>
void sum_rows_into(const T* p, std::int64_t rows, std::int64_t stride, std::int64_t width, WideSum* out,
                   const Term& term) {
  using B = typename Term::Block;
  const std::int64_t w = Full ? Width : width;
  SumCascade<Width> cascade;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kSumBlock) {
    const std::int64_t r1 = std::min(rows, r0 + kSumBlock);
    B block[Width] = {};
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* row = p + r * stride;
      for (std::int64_t j = 0; j < w; ++j) block[j] += term(row[j], j);
    }
    cascade.add_block(block, w);
  }
  cascade.template finish<Accumulate>(w, out);
}

/// The lanes pairwise: log2(L) levels of one addition each, lane j taking lane j + half. Each
/// level's trip count is a constant, so it compiles to a few vector adds in registers; a loop
/// over the levels went through memory, a store and a reload per addition, and was 40 % of a
/// 64-wide softmax row's time.
template <std::size_t Half, std::size_t L>
void add_halves(std::array<WideSum, L>& lanes) {
  for (std::size_t j = 0; j < Half; ++j) lanes[j] += lanes[j + Half];
  if constexpr (Half > 1) add_halves<Half / 2>(lanes);
}

/// Lanes [First, First + sizeof...(I)) of the vector v, as a vector of that many lanes: a
/// shuffle in registers where copying a part out of it went through the stack.
template <std::size_t First, class V, std::size_t... I>
auto lanes_of(const V& v, std::index_sequence<I...> /*lanes*/) {
  return __builtin_shufflevector(v, v, (First + I)...);
}

/// The lanes of a vector of doubles pairwise, as add_halves: lane j takes lane j + half.
template <class V>
WideSum add_vector_halves(const V& v) {
  constexpr std::size_t N = sizeof(V) / sizeof(WideSum);
  if constexpr (N == 1) {
    return v[0];
  } else {
    return add_vector_halves(lanes_of<0>(v, std::make_index_sequence<N / 2>()) +
                             lanes_of<N / 2>(v, std::make_index_sequence<N / 2>()));
  }
}

/// Each D-lane part h of `block`, widened to doubles, into out[h]: the parts in lane order.
template <class Wide, std::size_t D, class Block, std::size_t... H>
void widen_parts(const Block& block, Wide* out, std::index_sequence<H...> /*parts*/) {
  ((out[H] = __builtin_convertvector(lanes_of<H * D>(block, std::make_index_sequence<D>()), Wide)), ...);
}

/// sum_contiguous of whole rows of plain float or double values, few enough for one block (a
/// softmax row, a layer-norm row): the scalar path's lanes and additions, in registers. The
/// L lanes are vectors of 64 bytes (V of them); lane j is element j % W of vector j / W, so
/// add_halves' "lane j takes lane j + half" is "vector v takes vector v + count/2" while the
/// half spans whole vectors, and then the same within the last one. Every part of a vector is
/// taken out by a shuffle: copying it out through memory kept an accumulator on the stack in
/// the row loop and made each widening wait on a store (a 128-wide row took ~100 cycles).
template <class T>
WideSum sum_whole_rows_in_one_block(const T* p, std::int64_t rows) {
  constexpr int W = 64 / sizeof(T), V = static_cast<int>(kLanesOf<T>) / W, D = 8;  // D doubles a vector
  using Block = typename VectorOf<T, W>::type;
  using Wide = typename VectorOf<WideSum, D>::type;
  Block block[V] = {};
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int v = 0; v < V; ++v) {
      Block x;
      std::memcpy(&x, p + (r * V + v) * W, sizeof(x));
      block[v] += x;
    }
  }
  constexpr int Parts = W / D, N = V * Parts;  // N vectors of doubles
  Wide lanes[N];
  for (int v = 0; v < V; ++v) {
    widen_parts<Wide, D>(block[v], lanes + v * Parts, std::make_index_sequence<Parts>());
  }
  for (int count = N; count > 1; count /= 2) {
    for (int w = 0; w < count / 2; ++w) lanes[w] += lanes[w + count / 2];
  }
  return add_vector_halves(lanes[0]);
}
}  // namespace detail

/// out[j] += Σ_r term(p[r * stride + j], j) for j < width ≤ kLanesOf<Term::Block>, over
/// `rows` rows (a plain sum by default).
template <class T, class Term = Values<T>>
void sum_rows(const T* p, std::int64_t rows, std::int64_t stride, std::int64_t width, WideSum* out,
              const Term& term = {}) {
  constexpr std::int64_t L = kLanesOf<typename Term::Block>;
  if (width == L) detail::sum_rows_into<true, true, L>(p, rows, stride, L, out, term);
  else detail::sum_rows_into<false, true, L>(p, rows, stride, width, out, term);
}

namespace detail {
/// sum_contiguous's lanes in memory: any term, any length.
template <class T, class Term>
[[gnu::noinline]] WideSum sum_contiguous_lanes(const T* p, std::int64_t n, const Term& term) {
  constexpr std::int64_t L = kLanesOf<typename Term::Block>;
  std::array<WideSum, L> lanes;
  const std::int64_t rows = n / L;
  if (rows <= kSumBlock) {
    // One block (a softmax row, a short bias): the cascade would pass its lane sums on
    // unchanged, so they go straight to double, with the same result and none of its cost.
    using B = typename Term::Block;
    B block[L] = {};
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = 0; j < L; ++j) block[j] += term(p[r * L + j], j);
    }
    for (std::int64_t j = 0; j < L; ++j) lanes[static_cast<std::size_t>(j)] = static_cast<WideSum>(block[j]);
  } else {
    sum_rows_into<true, false, L>(p, rows, L, L, lanes.data(), term);
  }
  for (std::int64_t i = rows * L; i < n; ++i) {
    lanes[static_cast<std::size_t>(i - rows * L)] += static_cast<WideSum>(term(p[i], i - rows * L));
  }
  add_halves<L / 2>(lanes);
  return lanes[0];
}
}  // namespace detail

/// Σ term(p[i]) over n contiguous values (a plain sum by default), as a WideSum (round it
/// once to the output's dtype).
template <class T, class Term = Values<T>>
WideSum sum_contiguous(const T* p, std::int64_t n, const Term& term = {}) {
  constexpr std::int64_t L = kLanesOf<typename Term::Block>;
  if constexpr (std::is_same_v<Term, Values<T>> && std::is_same_v<T, typename Term::Block>) {
    if (n % L == 0 && n / L <= kSumBlock) return detail::sum_whole_rows_in_one_block(p, n / L);
  }
  return detail::sum_contiguous_lanes(p, n, term);
}

}  // namespace kiln::cpu
