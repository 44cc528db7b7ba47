// core/ops/reduce.h — raw reductions. Dims lists are wrapped and sorted; an empty list means
// every dim. Output dtypes follow PyTorch: sum/prod of integers and bool give Int64; mean
// needs a floating dtype; amax/amin/max/min keep the input's dtype.
// Read next: core/ops/linalg.h.
#pragma once

#include <optional>
#include <tuple>

#include "core/kernels.h"
#include "core/tensor.h"

namespace kiln::ops {

/// The shape of a reduction's output.
Shape reduced_shape(IntArrayRef sizes, IntArrayRef wrapped_dims, bool keepdim);

Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype = std::nullopt);
/// Σ x over dims / divisor, divided before the result is rounded to its (floating) dtype, so
/// it rounds once where sum, then a division, rounds twice (Note [How Kiln sums]). The
/// divisor is the reduced count for a mean, count - correction for var's centred squares:
///   ops::mean(x, {0}, false, x.size(0))   // x.mean({0})
Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, double divisor,
            std::optional<DType> dtype = std::nullopt);
/// (var, mean) of a floating x over dims: var = Σ (x - mean)² / max(N - correction, 0), both
/// rounded once (Note [var in two passes] in core/cpu/reduce.cpp; devices without a var
/// kernel compose it from mean, sub and mul). with_mean = false leaves the mean undefined.
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims, std::int64_t correction, bool keepdim,
                                    bool with_mean = true);
Tensor prod(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype = std::nullopt);
Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim);
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim);
/// (values, indices) of the max/min along `dim`; the first index among ties.
std::tuple<Tensor, Tensor> max_dim(const Tensor& x, std::int64_t dim, bool keepdim);
std::tuple<Tensor, Tensor> min_dim(const Tensor& x, std::int64_t dim, bool keepdim);
/// Index of the max/min over `dim`, or over the flattened tensor when no dim is given.
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim);
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim);

}  // namespace kiln::ops
