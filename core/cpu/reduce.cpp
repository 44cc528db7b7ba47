// core/cpu/reduce.cpp — CPU reductions (sum, prod, amax, amin) over any set of dims, and
// max/min with indices along one dim.
// Three layouts, picked per call (see Note [Reduction layouts]).
// Read next: core/cpu/gemm.cpp.
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/indexer.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"
#include "core/ops/allocate.h"

namespace kiln::cpu {

// Note [Reduction layouts]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A. The reduced elements of each output form one contiguous block (sum over the last dims
//    of a contiguous tensor, softmax's row sums): each output reduces its block, vectorised
//    by Eigen for float/double, outputs split across threads.
// B. The reduced dims all come before the kept dims of a contiguous tensor (the bias
//    gradient: sum over the batch of [N, D]): view it as an [R, K] matrix and accumulate
//    whole rows into K accumulators, which vectorises along K.
// C. Anything else (batch_norm's [N, C, H, W] over {0, 2, 3}): permute the reduced dims to
//    the back, copy to contiguous once, and use A. One extra pass beats a strided gather per
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

/// Reduces n contiguous elements.
template <ReduceOp Op, class R, class T>
typename R::Acc reduce_block(const T* p, std::int64_t n) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (n > 0) {
      Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> a(p, n);
      if constexpr (Op == ReduceOp::Sum) return a.sum();
      else if constexpr (Op == ReduceOp::Prod) return a.prod();
      else if constexpr (Op == ReduceOp::Amax) return a.template maxCoeff<Eigen::PropagateNaN>();
      else return a.template minCoeff<Eigen::PropagateNaN>();
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
};

Plan make_plan(const Tensor& in, IntArrayRef dims) {
  Plan p;
  std::vector<bool> reduced(static_cast<std::size_t>(in.dim()), false);
  for (auto d : dims) reduced[static_cast<std::size_t>(d)] = true;
  for (std::int64_t d = 0; d < in.dim(); ++d) {
    const auto s = in.sizes()[d];
    if (reduced[static_cast<std::size_t>(d)]) {
      p.red_sizes.push_back(s);
      p.red_strides.push_back(in.strides()[d]);
      p.red_numel *= s;
    } else {
      p.kept_sizes.push_back(s);
      p.kept_strides.push_back(in.strides()[d]);
      p.kept_numel *= s;
    }
  }
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

template <ReduceOp Op, template <class> class Reducer, class Types>
void reduce_kernel(const Tensor& out, const Tensor& in, IntArrayRef dims) {
  constexpr const char* kNames[] = {"sum_cpu", "prod_cpu", "amax_cpu", "amin_cpu"};
  const char* name = kNames[static_cast<int>(Op)];
  dispatch_dtype<Types>(in.dtype(), name, [&]<typename T>() {
    using R = Reducer<T>;
    T* o = out.data_ptr<T>();
    const Plan plan = make_plan(in, dims);
    const std::int64_t K = plan.kept_numel, N = plan.red_numel;
    if (N == 0 || in.numel() == 0) {
      for (std::int64_t i = 0; i < K; ++i) o[i] = static_cast<T>(R::init());
      return;
    }
    const T* x = in.data_ptr<T>();
    // Layout A: each output's block is contiguous.
    if (is_dense(plan.red_sizes, plan.red_strides, 1)) {
      const StridedIndexer kept(plan.kept_sizes, plan.kept_strides);
      parallel_for(0, K, std::max<std::int64_t>(1, kGrainSize / N), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          o[i] = static_cast<T>(reduce_block<Op, R>(x + kept.offset(i), N));
        }
      });
      return;
    }
    // Layout B: contiguous [R..., K...]: accumulate rows.
    const bool reduced_first =
        in.is_contiguous() &&
        [&] {
          std::int64_t last_reduced = -1, first_kept = in.dim();
          for (std::int64_t d = 0; d < in.dim(); ++d) {
            if (in.sizes()[d] == 1) continue;
            const bool is_red = std::find(dims.begin(), dims.end(), d) != dims.end();
            if (is_red) last_reduced = d;
            else first_kept = std::min(first_kept, d);
          }
          return last_reduced < first_kept;
        }();
    if (reduced_first) {
      using Acc = std::conditional_t<std::is_same_v<T, float> && Op == ReduceOp::Sum, double,
                                     typename R::Acc>;
      parallel_for(0, K, kGrainSize / 8, [&](std::int64_t b, std::int64_t e) {
        // unique_ptr<Acc[]>, not vector: vector<bool> hands out proxies, not references.
        std::unique_ptr<Acc[]> acc(new Acc[static_cast<std::size_t>(e - b)]);
        std::fill(acc.get(), acc.get() + (e - b), static_cast<Acc>(R::init()));
        for (std::int64_t r = 0; r < N; ++r) {
          const T* row = x + r * K;
          for (std::int64_t k = b; k < e; ++k) {
            auto& a = acc[static_cast<std::size_t>(k - b)];
            if constexpr (Op == ReduceOp::Sum) a = functors::wrapping_add(a, static_cast<Acc>(row[k]));
            else a = static_cast<Acc>(R::combine(static_cast<typename R::Acc>(a),
                                                 static_cast<typename R::Acc>(row[k])));
          }
        }
        for (std::int64_t k = b; k < e; ++k) o[k] = static_cast<T>(acc[static_cast<std::size_t>(k - b)]);
      });
      return;
    }
    // Layout C: permute reduced dims to the back, copy, then A.
    std::vector<std::int64_t> sizes = plan.kept_sizes, strides = plan.kept_strides;
    sizes.insert(sizes.end(), plan.red_sizes.begin(), plan.red_sizes.end());
    strides.insert(strides.end(), plan.red_strides.begin(), plan.red_strides.end());
    const Tensor packed = ops::empty_output(sizes, in.dtype(), kCPU, name);
    copy_kernel(packed, ops::make_view(in, sizes, strides, in.storage_offset(), name));
    const T* px = packed.data_ptr<T>();
    parallel_for(0, K, std::max<std::int64_t>(1, kGrainSize / N), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) o[i] = static_cast<T>(reduce_block<Op, R>(px + i * N, N));
    });
  });
}

}  // namespace

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
