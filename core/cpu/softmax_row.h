// core/cpu/softmax_row.h — softmax over one contiguous row and its backward, as the softmax
// kernels compute them (Note [One pass per softmax row] in core/cpu/softmax.cpp), for the
// kernels that make a row of scores themselves and take its softmax while it is in cache (the
// fused attention of core/cpu/attention.cpp): the same operations, so the same bits.
// Read next: core/cpu/softmax.cpp.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cpu/cascade_sum.h"
#include "core/cpu/eigen_exp.h"
#include "core/cpu/rows.h"

namespace kiln::cpu {

/// out = exp(x - max x) / Σ exp(x - max x) over n values (out may be x), of which only the
/// first `live` are exponentiated: the rest are known to be -inf (masked scores), so their
/// exp(-inf - max) is 0 and is written as 0. Each value is what the whole row's softmax gives
/// it: the zeros add nothing to the sum, which is still taken over n values, in its order.
template <class T>
void softmax_row(T* out, const T* x, std::int64_t n, std::int64_t live) {
  const ConstRow<T> in(x, live);
  Row<T> y(out, live);
  const T max = in.maxCoeff();
  assign_exp(y, in - max);
  std::fill(out + live, out + n, T(0));
  y /= static_cast<T>(sum_contiguous(out, n));
}
template <class T>
void softmax_row(T* out, const T* x, std::int64_t n) {
  softmax_row(out, x, n, n);
}

/// grad_in = y (g - Σ g y) over n values, of which y is 0 from `live` on (and so is grad_in
/// there, whatever g holds); `products` holds n values of scratch (grad_in may be g).
template <class T>
void softmax_backward_row(T* grad_in, const T* g, const T* y, std::int64_t n, std::int64_t live, T* products) {
  const ConstRow<T> go(g, live), out(y, live);
  Row<T> p(products, live);
  p = go * out;
  std::fill(products + live, products + n, T(0));
  const T sum = static_cast<T>(sum_contiguous(products, n));
  Row<T>(grad_in, live) = out * (go - sum);
  std::fill(grad_in + live, grad_in + n, T(0));
}
template <class T>
void softmax_backward_row(T* grad_in, const T* g, const T* y, std::int64_t n, T* products) {
  softmax_backward_row(grad_in, g, y, n, n, products);
}

}  // namespace kiln::cpu
