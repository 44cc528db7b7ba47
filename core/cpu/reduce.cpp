// core/cpu/reduce.cpp — CPU reductions (sum, prod, amax, amin) over any set of dims, var
// with its mean in two passes, and max/min with indices along one dim.
// Three layouts, picked per call (see Note [Reduction layouts]); floating sums add in the two
// tiers of Note [How Kiln sums] in every layout, and a mean's division comes before the
// result's one rounding.
// Read next: core/cpu/cascade_sum.h, core/cpu/gemm.cpp.
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cpu/cascade_sum.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/indexer.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops/allocate.h"

namespace kiln::cpu {

// Note [Reduction layouts]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A. The reduced elements of each output form one contiguous block (sum over the last dims
//    of a contiguous tensor, softmax's row sums): each output reduces its block, vectorised,
//    outputs split across threads (and a long block split too when there are fewer outputs
//    than threads: the sum of a whole tensor).
// B. The reduced dims form one band of a contiguous tensor, [O, R, K]: the bias gradient
//    (sum over the batch of [N, D], O = 1) or a mean over the sequence of [B, T, C]. Each
//    of the O blocks is an [R, K] matrix whose whole rows are accumulated into K
//    accumulators, which vectorises along K. When K is narrower than a row of lanes and
//    divides it (the [N, 2] of issue 32's accuracy probe), a block is read as rows of L
//    lanes, L / K rows of the matrix each, lane j adding column j mod K; the lanes of each
//    column are added at the end. Every lane still adds kSumBlock values of its column before
//    the cascade, so this is Note [How Kiln sums] as in A, at A's speed rather than with two
//    lanes busy out of 64. Other reductions than floating sums take B only for O = 1.
// C. Anything else (batch_norm's [N, C, H, W] over {0, 2, 3}). A floating sum whose innermost
//    reduced dims form a dense run of at least a row of lanes (H*W here) sums each run in
//    place, as in A, and adds the runs of each output. Otherwise: permute the reduced dims to
//    the back, copy to contiguous once, and use A; one extra pass beats a strided gather per
//    element.

namespace {

template <class T>
struct SumReducer {
  using Acc = AccType<T>;
  static Acc init() { return Acc(0); }
  static Acc combine(Acc a, Acc v) { return functors::wrapping_add(a, v); }
};
template <class T>
struct ProdReducer {
  using Acc = AccType<T>;
  static Acc init() { return Acc(1); }
  static Acc combine(Acc a, Acc v) { return functors::wrapping_mul(a, v); }
};
template <class T>
struct MaxReducer {
  using Acc = OpMath<T>;
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity) return -std::numeric_limits<Acc>::infinity();
    else return std::numeric_limits<Acc>::lowest();
  }
  static Acc combine(Acc a, Acc v) { return functors::Maximum{}(a, v); }
};
template <class T>
struct MinReducer {
  using Acc = OpMath<T>;
  static Acc init() {
    if constexpr (std::numeric_limits<Acc>::has_infinity) return std::numeric_limits<Acc>::infinity();
    else return std::numeric_limits<Acc>::max();
  }
  static Acc combine(Acc a, Acc v) { return functors::Minimum{}(a, v); }
};

template <class T>
inline constexpr bool kIsFloating =
    std::is_floating_point_v<T> || std::is_same_v<T, Eigen::half> || std::is_same_v<T, Eigen::bfloat16>;

/// Reduces n contiguous elements (a floating sum takes sum_contiguous instead). Extremes are
/// exact in any order, so Eigen vectorises them; a product runs serially in AccType.
template <ReduceOp Op, class R, class T>
typename R::Acc reduce_block(const T* p, std::int64_t n) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (n > 0) {
      Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> a(p, n);
      if constexpr (Op == ReduceOp::Amax) return a.template maxCoeff<Eigen::PropagateNaN>();
      else if constexpr (Op == ReduceOp::Amin) return a.template minCoeff<Eigen::PropagateNaN>();
    }
  }
  typename R::Acc acc = R::init();
  for (std::int64_t i = 0; i < n; ++i) acc = R::combine(acc, static_cast<typename R::Acc>(p[i]));
  return acc;
}

struct Plan {
  std::vector<std::int64_t> kept_sizes, kept_strides;  // input strides of kept dims
  std::vector<std::int64_t> red_sizes, red_strides;
  std::int64_t kept_numel = 1, red_numel = 1;
  // Layout B: a contiguous [outer, R, inner], the reduced dims one band between kept ones.
  bool banded = false;
  std::int64_t outer = 1, inner = 1;
  bool reduced_first = false;  // banded with outer == 1: [R..., K...]
};

Plan make_plan(const Tensor& in, IntArrayRef dims) {
  Plan p;
  std::vector<bool> reduced(static_cast<std::size_t>(in.dim()), false);
  for (auto d : dims) reduced[static_cast<std::size_t>(d)] = true;
  enum { Outer, Band, Inner, Scattered } part = Outer;  // where the dims seen so far put us
  for (std::int64_t d = 0; d < in.dim(); ++d) {
    const auto s = in.sizes()[d];
    if (reduced[static_cast<std::size_t>(d)]) {
      p.red_sizes.push_back(s);
      p.red_strides.push_back(in.strides()[d]);
      p.red_numel *= s;
      if (s != 1) part = part == Outer || part == Band ? Band : Scattered;
    } else {
      p.kept_sizes.push_back(s);
      p.kept_strides.push_back(in.strides()[d]);
      p.kept_numel *= s;
      if (s == 1 || part == Scattered) continue;
      if (part == Outer) {
        p.outer *= s;
      } else {
        part = Inner;
        p.inner *= s;
      }
    }
  }
  p.banded = in.is_contiguous() && part != Scattered;
  p.reduced_first = p.banded && p.outer == 1;
  return p;
}

/// True when dims (sizes, strides), ignoring size-1 dims, are row-major contiguous with
/// innermost stride `unit`.
bool is_dense(const std::vector<std::int64_t>& sizes, const std::vector<std::int64_t>& strides,
              std::int64_t unit) {
  std::int64_t expected = unit;
  for (std::size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

/// Into how many pieces to cut each of `outputs` reductions of `work` elements, so that a few
/// long reductions (a whole tensor's sum, batch norm's channels) still spread over the threads.
/// Decided from the sizes alone, never from the thread count: a sum's order of additions, and
/// so its last bits, are the same however many threads run it.
std::int64_t pieces_per_output(std::int64_t outputs, std::int64_t work) {
  constexpr std::int64_t kManyOutputs = 64;  // enough to share out whole
  if (outputs >= kManyOutputs) return 1;
  return std::max<std::int64_t>(1, work / kGrainSize);
}

/// [begin, end) of piece `s` of `pieces` over n items, each a multiple of `align` but the last.
std::pair<std::int64_t, std::int64_t> piece_range(std::int64_t s, std::int64_t pieces, std::int64_t n,
                                                  std::int64_t align) {
  const std::int64_t size = ((n + pieces - 1) / pieces + align - 1) / align * align;
  return {std::min(n, s * size), std::min(n, (s + 1) * size)};
}

/// A floating sum's one rounding: the wide sum divided by the divisor (a mean's count, var's
/// count - correction, 1 for a sum) while it is still a double, then rounded to T.
template <class T>
T round_once(WideSum sum, double divisor) {
  // x / 1 is x: a plain sum skips the division, which costs a [128, 512] sum over dim 0 15 %.
  return static_cast<T>(divisor == 1 ? sum : sum / divisor);
}

/// What each element of a floating reduction adds (cascade_sum.h's block terms), for the
/// lanes of output i (layouts A and C: of_output) or for a row of lanes holding columns
/// (layout B: of_columns, of_lanes). A sum adds the values...
template <class T>
struct PlainTerms {
  Values<T> of_output(std::int64_t) const { return {}; }
  Values<T> of_columns(std::int64_t) const { return {}; }
  template <std::size_t L>
  Values<T> of_lanes(std::int64_t, std::int64_t, std::array<WideSum, L>&) const { return {}; }
};
/// ...var's first pass the values in double...
template <class T>
struct WideTerms {
  WideValues<T> of_output(std::int64_t) const { return {}; }
  WideValues<T> of_columns(std::int64_t) const { return {}; }
  template <std::size_t L>
  WideValues<T> of_lanes(std::int64_t, std::int64_t, std::array<WideSum, L>&) const { return {}; }
};
/// ...and its second pass their squared deviations from each output's mean. of_columns(i):
/// lane j belongs to output i + j; of_lanes(i, K, centres): lane j to output i + j mod K (a
/// narrow layout B), whose means it copies into `centres`.
template <class T>
struct DeviationTerms {
  const WideSum* means;  // one per output
  SquaredDeviations<T> of_output(std::int64_t i) const { return {means[i]}; }
  SquaredDeviationsPerLane<T> of_columns(std::int64_t i) const { return {means + i}; }
  template <std::size_t L>
  SquaredDeviationsPerLane<T> of_lanes(std::int64_t i, std::int64_t K, std::array<WideSum, L>& centres) const {
    for (std::size_t j = 0; j < L; ++j) centres[j] = means[i + static_cast<std::int64_t>(j) % K];
    return {centres.data()};
  }
};

/// Runs piece(i, s) -> WideSum for every output i < outputs and piece s < pieces in parallel,
/// and hands each output's pieces, added in order, to emit(i, total).
template <class Piece, class Emit>
void sum_pieces(std::int64_t outputs, std::int64_t pieces, std::int64_t work_per_output, const Piece& piece,
                const Emit& emit) {
  std::vector<WideSum> partial(static_cast<std::size_t>(outputs * pieces));
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainSize * pieces / std::max<std::int64_t>(work_per_output, 1));
  parallel_for(0, outputs * pieces, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) partial[static_cast<std::size_t>(t)] = piece(t / pieces, t % pieces);
  });
  for (std::int64_t i = 0; i < outputs; ++i) {
    WideSum s = 0;
    for (std::int64_t p = 0; p < pieces; ++p) s += partial[static_cast<std::size_t>(i * pieces + p)];
    emit(i, s);
  }
}

/// Layout C's dense run: how many of the innermost reduced dims form one contiguous run, and
/// its length (Note [Reduction layouts]).
std::pair<std::size_t, std::int64_t> inner_dense_run(const Plan& p) {
  std::size_t dims = 0;
  std::int64_t length = 1;
  for (std::size_t d = p.red_sizes.size(); d-- > 0; ++dims) {
    if (p.red_sizes[d] != 1 && p.red_strides[d] != length) break;
    length *= p.red_sizes[d];
  }
  return {dims, length};
}

/// True when a floating sum can read the input where it lies: layouts A and B, and a layout C
/// whose dense run fills at least a row of lanes. The rest is packed first.
template <class T>
bool sums_in_place(const Plan& plan) {
  return is_dense(plan.red_sizes, plan.red_strides, 1) || plan.banded ||
         inner_dense_run(plan).second >= kSumLanes<T>;
}

/// The input with its reduced dims moved to the back and copied contiguous once (layout C's
/// fallback), with the plan of the same reduction over it: layout A.
std::pair<Tensor, Plan> pack_reduced_last(const Tensor& in, const Plan& plan, const char* name) {
  std::vector<std::int64_t> sizes = plan.kept_sizes, strides = plan.kept_strides;
  sizes.insert(sizes.end(), plan.red_sizes.begin(), plan.red_sizes.end());
  strides.insert(strides.end(), plan.red_strides.begin(), plan.red_strides.end());
  Tensor packed = ops::empty_output(sizes, in.dtype(), kCPU, name);
  copy_kernel(packed, ops::make_view(in, sizes, strides, in.storage_offset(), name));
  std::vector<std::int64_t> trailing;
  for (auto d = static_cast<std::int64_t>(plan.kept_sizes.size()); d < packed.dim(); ++d) trailing.push_back(d);
  Plan packed_plan = make_plan(packed, trailing);
  return {std::move(packed), std::move(packed_plan)};
}

/// Layout B, [O, R, K] contiguous, for a floating reduction: output o·K + k adds column k of
/// block o's R rows (Note [Reduction layouts]).
template <class T, class Terms, class Emit>
void sum_banded(const T* x, const Plan& plan, const Terms& terms, const Emit& emit) {
  const std::int64_t O = plan.outer, R = plan.red_numel, K = plan.inner;
  constexpr std::int64_t L = kLanesOf<typename decltype(terms.of_columns(0))::Block>;
  if (K < L && L % K == 0) {
    // Narrow: block o's R·K values, read as rows of L lanes, lane j adding column j mod K.
    const std::int64_t n = R * K, rows = n / L, tail = n % L;  // tail: a multiple of K
    const std::int64_t pieces = pieces_per_output(O, n);
    std::vector<WideSum> partial(static_cast<std::size_t>(O * pieces * L), 0.0);
    parallel_for(0, O * pieces, std::max<std::int64_t>(1, kGrainSize * pieces / n), [&](std::int64_t b, std::int64_t e) {
      std::array<WideSum, L> centres;  // what of_lanes fills for var's pass 2
      for (std::int64_t t = b; t < e; ++t) {
        const std::int64_t o = t / pieces, s = t % pieces;
        const T* block = x + o * n;
        WideSum* lanes = &partial[static_cast<std::size_t>(t * L)];
        const auto term = terms.of_lanes(o * K, K, centres);
        const auto [r0, r1] = piece_range(s, pieces, rows, kSumBlock);
        sum_rows(block + r0 * L, r1 - r0, L, L, lanes, term);
        if (s == pieces - 1 && tail > 0) sum_rows(block + rows * L, 1, L, tail, lanes, term);
      }
    });
    for (std::int64_t o = 0; o < O; ++o) {
      for (std::int64_t k = 0; k < K; ++k) {
        WideSum total = 0;
        for (std::int64_t s = 0; s < pieces; ++s) {
          const WideSum* lanes = &partial[static_cast<std::size_t>((o * pieces + s) * L)];
          for (std::int64_t j = k; j < L; j += K) total += lanes[j];
        }
        emit(o * K + k, total);
      }
    }
    return;
  }
  // Tiles of L columns, each over its share of the rows.
  const std::int64_t tiles = (K + L - 1) / L;
  const std::int64_t pieces = pieces_per_output(O * tiles, R * std::min(K, L));
  std::vector<WideSum> partial(static_cast<std::size_t>(O * pieces * K), 0.0);
  parallel_for(0, O * tiles * pieces, std::max<std::int64_t>(1, kGrainSize * pieces / (R * L)),
               [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t tile = t / pieces, s = t % pieces;
      const std::int64_t o = tile / tiles, k0 = tile % tiles * L;
      const auto [r0, r1] = piece_range(s, pieces, R, kSumBlock);
      sum_rows(x + (o * R + r0) * K + k0, r1 - r0, K, std::min(L, K - k0),
               &partial[static_cast<std::size_t>((o * pieces + s) * K + k0)], terms.of_columns(o * K + k0));
    }
  });
  for (std::int64_t o = 0; o < O; ++o) {
    for (std::int64_t k = 0; k < K; ++k) {
      WideSum total = 0;
      for (std::int64_t s = 0; s < pieces; ++s) total += partial[static_cast<std::size_t>((o * pieces + s) * K + k)];
      emit(o * K + k, total);
    }
  }
}

/// A floating reduction of every output, each element adding its term (Note [How Kiln
/// sums]), in the layout the input has (sums_in_place must hold); each output's total, a
/// WideSum, goes to emit(i, total).
template <class T, class Terms, class Emit>
void sum_floating(const T* x, const Plan& plan, const Terms& terms, const Emit& emit) {
  const std::int64_t K = plan.kept_numel, N = plan.red_numel;
  const StridedIndexer kept(plan.kept_sizes, plan.kept_strides);
  if (is_dense(plan.red_sizes, plan.red_strides, 1)) {  // A
    constexpr std::int64_t L = kLanesOf<typename decltype(terms.of_output(0))::Block>;
    const std::int64_t pieces = pieces_per_output(K, N);
    sum_pieces(K, pieces, N, [&](std::int64_t i, std::int64_t s) {
      const auto [b, e] = piece_range(s, pieces, N, L);
      return sum_contiguous(x + kept.offset(i) + b, e - b, terms.of_output(i));
    }, emit);
    return;
  }
  if (plan.banded) {  // B
    sum_banded(x, plan, terms, emit);
    return;
  }
  // C: the outer reduced dims index runs; each output adds its runs' sums in a cascade.
  const auto [run_dims, run] = inner_dense_run(plan);
  const std::size_t outer_dims = plan.red_sizes.size() - run_dims;
  const StridedIndexer outer({plan.red_sizes.begin(), plan.red_sizes.begin() + static_cast<std::ptrdiff_t>(outer_dims)},
                             {plan.red_strides.begin(), plan.red_strides.begin() + static_cast<std::ptrdiff_t>(outer_dims)});
  const std::int64_t runs = N / run, pieces = pieces_per_output(K, N);
  sum_pieces(K, pieces, N, [&](std::int64_t i, std::int64_t s) {
    const auto [m0, m1] = piece_range(s, pieces, runs, 1);
    detail::SumCascade<1> cascade;
    for (std::int64_t m = m0; m < m1; ++m) {
      const WideSum run_sum = sum_contiguous(x + kept.offset(i) + outer.offset(m), run, terms.of_output(i));
      cascade.add_block(&run_sum, 1);
    }
    WideSum total;
    cascade.finish</*Accumulate=*/false>(1, &total);
    return total;
  }, emit);
}

template <ReduceOp Op, template <class> class Reducer, class Types>
void reduce_kernel(const Tensor& out, const Tensor& in, IntArrayRef dims, double divisor) {
  constexpr const char* kNames[] = {"sum_cpu", "prod_cpu", "amax_cpu", "amin_cpu"};
  const char* name = kNames[static_cast<int>(Op)];
  dispatch_dtype<Types>(in.dtype(), name, [&]<typename T>() {
    using R = Reducer<T>;
    constexpr bool kFloatingSum = Op == ReduceOp::Sum && kIsFloating<T>;
    T* o = out.data_ptr<T>();
    Plan plan = make_plan(in, dims);
    const std::int64_t K = plan.kept_numel, N = plan.red_numel;
    if (N == 0 || in.numel() == 0) {
      // An empty mean is 0 / 0: NaN, as in PyTorch.
      for (std::int64_t i = 0; i < K; ++i) {
        if constexpr (kFloatingSum) o[i] = round_once<T>(R::init(), divisor);
        else o[i] = static_cast<T>(R::init());
      }
      return;
    }
    const T* x = in.data_ptr<T>();
    Tensor packed;
    const bool in_place = kFloatingSum ? sums_in_place<T>(plan)
                                       : is_dense(plan.red_sizes, plan.red_strides, 1) || plan.reduced_first;
    if (!in_place) {  // C, packed: then A
      std::tie(packed, plan) = pack_reduced_last(in, plan, name);
      x = packed.data_ptr<T>();
    }
    if constexpr (kFloatingSum) {
      sum_floating(x, plan, PlainTerms<T>{}, [&](std::int64_t i, WideSum s) { o[i] = round_once<T>(s, divisor); });
    } else if (is_dense(plan.red_sizes, plan.red_strides, 1)) {
      // Layout A: each output's block is contiguous.
      const StridedIndexer kept(plan.kept_sizes, plan.kept_strides);
      parallel_for(0, K, std::max<std::int64_t>(1, kGrainSize / N), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          o[i] = static_cast<T>(reduce_block<Op, R>(x + kept.offset(i), N));
        }
      });
    } else {
      // Layout B: contiguous [R..., K...]: accumulate rows.
      using Acc = typename R::Acc;
      parallel_for(0, K, kGrainSize / 8, [&](std::int64_t b, std::int64_t e) {
        // unique_ptr<Acc[]>, not vector: vector<bool> hands out proxies, not references.
        std::unique_ptr<Acc[]> acc(new Acc[static_cast<std::size_t>(e - b)]);
        std::fill(acc.get(), acc.get() + (e - b), R::init());
        for (std::int64_t r = 0; r < N; ++r) {
          const T* row = x + r * K;
          for (std::int64_t k = b; k < e; ++k) {
            auto& a = acc[static_cast<std::size_t>(k - b)];
            a = R::combine(a, static_cast<Acc>(row[k]));
          }
        }
        for (std::int64_t k = b; k < e; ++k) o[k] = static_cast<T>(acc[static_cast<std::size_t>(k - b)]);
      });
    }
  });
}

}  // namespace

// Note [var in two passes]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// var = Σ (x - mean)² / (N - correction), the textbook two-pass formula (one pass of
// E[x²] - E[x]² cancels: 6 of Float32's 7 digits for data of mean 1000 and std 1). Both
// passes read the input where it lies, in any layout of Note [Reduction layouts], and add in
// double lanes before the cascade of Note [How Kiln sums]:
//  1. the mean, kept in double. A mean off by δ adds N·δ² to the squares' sum, (δ/σ)² of
//     var: summed in float blocks, 40 columns of 8195 values of mean 10^4 and std 1 had δ up
//     to 1.3e-4, a quarter of an ulp of var, so this sum adds in double blocks too (the block
//     term WideValues);
//  2. the squared deviations from it, each computed and added in double (the block term
//     SquaredDeviations): float squares of Float32 data far from zero have structured low
//     bits, and the float tier's roundings of them do not cancel (cascade_sum.h).
// The double is divided by N - correction and rounded once, so the result is the exact
// variance correctly rounded but for a few units of 1e-16, as PyTorch's CPU var (Welford
// in double) is. Composed from ops instead (mean, sub, mul, sum, div), var made five passes
// and two temporaries, and rounded the mean, each square, the sum and the quotient.

void var_mean_kernel(const Tensor& var, const Tensor& mean, const Tensor& in, IntArrayRef dims, double divisor) {
  dispatch_dtype<FloatingTypes>(in.dtype(), "var_cpu", [&]<typename T>() {
    T* v = var.data_ptr<T>();
    T* m = mean.defined() ? mean.data_ptr<T>() : nullptr;
    Plan plan = make_plan(in, dims);
    const std::int64_t K = plan.kept_numel, N = plan.red_numel;
    std::vector<WideSum> means(static_cast<std::size_t>(K), 0.0);
    if (N > 0 && in.numel() > 0) {
      const T* x = in.data_ptr<T>();
      Tensor packed;
      if (!sums_in_place<T>(plan)) {
        std::tie(packed, plan) = pack_reduced_last(in, plan, "var_cpu");
        x = packed.data_ptr<T>();
      }
      const auto n = static_cast<WideSum>(N);
      sum_floating(x, plan, WideTerms<T>{}, [&](std::int64_t i, WideSum s) { means[static_cast<std::size_t>(i)] = s / n; });
      sum_floating(x, plan, DeviationTerms<T>{means.data()}, [&](std::int64_t i, WideSum s) { v[i] = round_once<T>(s, divisor); });
    } else {
      // Empty: 0 / 0 is NaN for both, as in PyTorch.
      for (std::int64_t i = 0; i < K; ++i) {
        means[static_cast<std::size_t>(i)] = WideSum(0) / static_cast<WideSum>(N);
        v[i] = round_once<T>(0, divisor);
      }
    }
    if (m) {
      for (std::int64_t i = 0; i < K; ++i) m[i] = static_cast<T>(means[static_cast<std::size_t>(i)]);
    }
  });
}

std::array<ReduceKernel, static_cast<std::size_t>(ReduceOp::kCount)> reduce_kernels() {
  // Same order as the ReduceOp enum. Sum and prod see Int64/Float inputs only: the op
  // front-end casts integers and bool to Int64 first.
  return exactly_one_per<ReduceKernel, ReduceOp>(
      &reduce_kernel<ReduceOp::Sum, SumReducer, NumericTypes>,
      &reduce_kernel<ReduceOp::Prod, ProdReducer, NumericTypes>,
      &reduce_kernel<ReduceOp::Amax, MaxReducer, AllTypes>,
      &reduce_kernel<ReduceOp::Amin, MinReducer, AllTypes>);
}

void arg_reduce_kernel(const Tensor& values, const Tensor& indices, const Tensor& in,
                       std::int64_t dim, bool is_max) {
  dispatch_dtype<AllTypes>(in.dtype(), is_max ? "max_cpu" : "min_cpu", [&]<typename T>() {
    using M = OpMath<T>;
    T* v = values.data_ptr<T>();
    std::int64_t* idx = indices.data_ptr<std::int64_t>();
    const T* x = in.data_ptr<T>();
    const std::int64_t n = in.sizes()[dim];
    const std::int64_t step = in.strides()[dim];
    const StridedIndexer outer = indexer_without_dim(in.sizes(), in.strides(), dim);
    const std::int64_t K = outer.numel();
    parallel_for(0, K, std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(n, 1)),
                 [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        const T* p = x + outer.offset(i);
        M best = static_cast<M>(p[0]);
        std::int64_t best_j = 0;
        for (std::int64_t j = 1; j < n && !functors::is_nan(best); ++j) {
          const M cur = static_cast<M>(p[j * step]);
          // NaN counts as the extreme, as in PyTorch; ties keep the first index.
          if (functors::is_nan(cur) || (is_max ? cur > best : cur < best)) {
            best = cur;
            best_j = j;
          }
        }
        v[i] = static_cast<T>(best);
        idx[i] = best_j;
      }
    });
  });
}

}  // namespace kiln::cpu
