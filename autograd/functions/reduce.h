// autograd/functions/reduce.h — differentiable reductions beyond the Tensor methods, and
// sum_to, the one helper that undoes broadcasting in every backward formula.
#pragma once

#include <tuple>

#include "core/tensor.h"

namespace kiln {

/// Sums `grad` down to `shape` (the shape of an input that was broadcast to grad's shape):
/// leading dims are summed away and dims of size 1 in `shape` are summed with keepdim.
///
///   sum_to(ones({4, 2, 3}), {2, 1})  ->  [[12.], [12.]]
Tensor sum_to(const Tensor& grad, IntArrayRef shape);

/// torch.std_mean: the standard deviation and the mean over `dims` (all when empty), in one
/// call: auto [std_dev, mean] = std_mean(x, {1});
struct StdMean {
  Tensor std;
  Tensor mean;
  operator ::std::tuple<Tensor, Tensor>() const { return {std, mean}; }  // NOLINT: implicit
};
StdMean std_mean(const Tensor& x, IntArrayRef dims = {}, bool unbiased = true, bool keepdim = false);

/// torch.var_mean: the variance and the mean over `dims` (all when empty).
struct VarMean {
  Tensor var;
  Tensor mean;
  operator ::std::tuple<Tensor, Tensor>() const { return {var, mean}; }  // NOLINT: implicit
};
VarMean var_mean(const Tensor& x, IntArrayRef dims = {}, bool unbiased = true, bool keepdim = false);

}  // namespace kiln
