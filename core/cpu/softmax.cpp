// core/cpu/softmax.cpp — softmax and log-softmax along one dim, forward and backward.
//
// Note [One pass per softmax row]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Composed from ops, softmax(x) = exp(x - max) / Σ exp(x - max)
// makes five passes over the tensor and allocates four temporaries (the max, the difference,
// the exponentials, the sums), and its backward y (g - Σ g y) four more; log-softmax through
// logsumexp makes eight. Here each row is read into the cache once: its max, then the
// exponentials and their sum, then the scaling, all while the row is hot. The sums are Kiln's
// cascade (Note [How Kiln sums] in core/cpu/cascade_sum.h), so a Float32 row of any length
// sums within a few ε, as the composed ops did. The tensor is seen as [outer, n, inner] with the reduced dim n in the middle; when the
// dim is the last one (inner = 1: attention's scores, a classifier's logits) each row is
// contiguous and Eigen vectorises along it, otherwise along inner, n rows at a time.
// Read next: autograd/functions/softmax.cpp.
#include <Eigen/Core>

#include <cmath>

#include "core/cpu/cascade_sum.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/eigen_exp.h"
#include "core/cpu/parallel.h"
#include "core/cpu/rows.h"
#include "core/cpu/softmax_row.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {

using SoftmaxTypes = TypeList<float, double>;

// One outer slice [n, inner] as an inner x n column-major array: column i is element i of
// every row, so reductions over the dim run along Eigen's rows.
template <class T>
using Block = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>>;
template <class T>
using ConstBlock = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, Eigen::Dynamic>>;

struct Geometry {
  std::int64_t outer = 1, n = 1, inner = 1;
};

Geometry geometry_of(const Tensor& t, std::int64_t dim) {
  Geometry g;
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t size = t.sizes()[static_cast<std::size_t>(d)];
    if (d < dim) g.outer *= size;
    if (d == dim) g.n = size;
    if (d > dim) g.inner *= size;
  }
  return g;
}

/// log-softmax subtracts log Σ exp(x - m) from x - m. An infinite max is replaced by 0, as
/// logsumexp does, so that a row of -inf gives -inf - (-inf) = NaN like PyTorch, not a
/// NaN from the shift.
template <class T>
T shift_of(T max) {
  return std::isinf(max) ? T(0) : max;
}

/// Σ over the dim of an [inner x n] block (Kiln's cascade, lanes along inner), into sums.
template <class T>
void sum_block(const T* p, const Geometry& g, Eigen::ArrayXd& sums) {
  sums.setZero(g.inner);
  constexpr std::int64_t L = kSumLanes<T>;
  for (std::int64_t j = 0; j < g.inner; j += L) sum_rows(p + j, g.n, g.inner, std::min(L, g.inner - j), sums.data() + j);
}

template <class T>
void forward_row(T* out, const T* x, std::int64_t n, bool log) {
  if (!log) {
    softmax_row(out, x, n);
    return;
  }
  const ConstRow<T> in(x, n);
  Row<T> y(out, n);
  y = in - shift_of(in.maxCoeff());
  auto& exponentials = scratch_row<T>(n);
  assign_exp(exponentials, y);
  y -= static_cast<T>(std::log(sum_contiguous(exponentials.data(), n)));
}

template <class T>
void forward_block(T* out, const T* x, const Geometry& g, bool log) {
  const ConstBlock<T> in(x, g.inner, g.n);
  Block<T> y(out, g.inner, g.n);
  Eigen::Array<T, Eigen::Dynamic, 1> shift = in.rowwise().maxCoeff();
  Eigen::ArrayXd sums;
  if (log) {
    shift = shift.unaryExpr([](T m) { return shift_of(m); });
    y = in.colwise() - shift;
    auto& exponentials = scratch_row<T>(g.n * g.inner);
    assign_exp(Block<T>(exponentials.data(), g.inner, g.n), y);
    sum_block(exponentials.data(), g, sums);
    y.colwise() -= sums.log().template cast<T>();
  } else {
    assign_exp(y, in.colwise() - shift);
    sum_block(out, g, sums);
    y.colwise() /= sums.template cast<T>();
  }
}

template <class T>
void backward_row(T* grad_in, const T* grad_out, const T* y, std::int64_t n, bool log) {
  if (!log) {
    softmax_backward_row(grad_in, grad_out, y, n, scratch_row<T>(n).data());
    return;
  }
  const ConstRow<T> g(grad_out, n), out(y, n);
  auto& exponentials = scratch_row<T>(n);
  assign_exp(exponentials, out);
  Row<T>(grad_in, n) = g - exponentials * static_cast<T>(sum_contiguous(grad_out, n));
}

template <class T>
void backward_block(T* grad_in, const T* grad_out, const T* y, const Geometry& geo, bool log) {
  const ConstBlock<T> g(grad_out, geo.inner, geo.n), out(y, geo.inner, geo.n);
  Block<T> gi(grad_in, geo.inner, geo.n);
  Eigen::ArrayXd sums;
  if (log) {
    sum_block(grad_out, geo, sums);
    auto& exponentials = scratch_row<T>(geo.n * geo.inner);
    Block<T> e(exponentials.data(), geo.inner, geo.n);
    assign_exp(e, out);
    gi = g - e * sums.template cast<T>().replicate(1, geo.n);
  } else {
    auto& products = scratch_row<T>(geo.n * geo.inner);
    Block<T>(products.data(), geo.inner, geo.n) = g * out;
    sum_block(products.data(), geo, sums);
    gi = out * (g - sums.template cast<T>().replicate(1, geo.n));
  }
}

}  // namespace

void softmax_forward_kernel(const Tensor& out, const Tensor& x, std::int64_t dim, bool log) {
  const Geometry g = geometry_of(x, dim);
  if (g.n == 0) return;
  dispatch_dtype<SoftmaxTypes>(x.dtype(), "softmax_cpu", [&]<typename T>() {
    const T* const in = x.data_ptr<T>();
    T* const y = out.data_ptr<T>();
    const std::int64_t slice = g.n * g.inner;
    parallel_for(0, g.outer, rows_per_task(slice), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o) {
        if (g.inner == 1) {
          forward_row(y + o * slice, in + o * slice, g.n, log);
        } else {
          forward_block(y + o * slice, in + o * slice, g, log);
        }
      }
    });
  });
}

void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& y, std::int64_t dim,
                             bool log) {
  const Geometry g = geometry_of(y, dim);
  if (g.n == 0) return;
  dispatch_dtype<SoftmaxTypes>(y.dtype(), "softmax_backward_cpu", [&]<typename T>() {
    T* const gi = grad_input.data_ptr<T>();
    const T* const go = grad_output.data_ptr<T>();
    const T* const out = y.data_ptr<T>();
    const std::int64_t slice = g.n * g.inner;
    parallel_for(0, g.outer, rows_per_task(slice), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t o = begin; o < end; ++o) {
        if (g.inner == 1) {
          backward_row(gi + o * slice, go + o * slice, out + o * slice, g.n, log);
        } else {
          backward_block(gi + o * slice, go + o * slice, out + o * slice, g, log);
        }
      }
    });
  });
}

}  // namespace kiln::cpu
