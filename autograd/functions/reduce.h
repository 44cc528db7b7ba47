// autograd/functions/reduce.h — differentiable reductions beyond the Tensor methods, and
// sum_to, the one helper that undoes broadcasting in every backward formula.
#pragma once

#include "core/tensor.h"

namespace kiln {

/// Sums `grad` down to `shape` (the shape of an input that was broadcast to grad's shape):
/// leading dims are summed away and dims of size 1 in `shape` are summed with keepdim.
///
///   sum_to(ones({4, 2, 3}), {2, 1})  ->  [[12.], [12.]]
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

}  // namespace kiln
