// core/ops/index.h — raw ops that build new tensors by moving elements: cat, the index
// family (index_select/index_add, gather/scatter) and nonzero. Index tensors are Int64 and are
// range-checked before any kernel runs (an out-of-range index is an IndexError, never a
// read past the end).
// Read next: core/ops/conv.h.
#pragma once

#include <source_location>

#include "core/tensor.h"

namespace kiln::ops {

Tensor cat(const TensorList& tensors, std::int64_t dim);
Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
/// self with source's slices added at `index` along dim (duplicates accumulate).
Tensor index_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source);
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
/// self with src's elements written (or added, when accumulate) at `index` along dim.
Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
               bool accumulate);
/// The positions of x's nonzero elements (NaN counts as nonzero), one row each in row-major
/// order: Int64 [count, x.dim()] on x's device. The count is read on the host, so a device
/// tensor is synchronised, and a captured step cannot replay it (PyTorch's nonzero syncs too).
Tensor nonzero(const Tensor& x, std::source_location where = std::source_location::current());

}  // namespace kiln::ops
