// core/cpu/softmax_row.h — softmax over one contiguous row and its backward, as the softmax
// kernels compute them (Note [One pass per softmax row] in core/cpu/softmax.cpp), for the
// kernels that make a row of scores themselves and take its softmax while it is in cache (the
// fused attention of core/cpu/attention.cpp): the same operations, so the same bits.
// Read next: core/cpu/softmax.cpp.
#pragma once

#include <cstdint>

#include "core/cpu/cascade_sum.h"
#include "core/cpu/eigen_exp.h"
#include "core/cpu/rows.h"

namespace kiln::cpu {

/// out = exp(x - max x) / Σ exp(x - max x) over n values (out may be x).
template <class T>
void softmax_row(T* out, const T* x, std::int64_t n) {
  const ConstRow<T> in(x, n);
  Row<T> y(out, n);
  const T max = in.maxCoeff();
  y = (in - max).exp();
  zero_exp_floor(out, n);
  y /= static_cast<T>(sum_contiguous(out, n));
}

/// grad_in = y (g - Σ g y) over n values; `products` holds n values of scratch (grad_in may be g).
template <class T>
void softmax_backward_row(T* grad_in, const T* g, const T* y, std::int64_t n, T* products) {
  const ConstRow<T> go(g, n), out(y, n);
  Row<T> p(products, n);
  p = go * out;
  const T sum = static_cast<T>(sum_contiguous(products, n));
  Row<T>(grad_in, n) = out * (go - sum);
}

}  // namespace kiln::cpu
