// autograd/functions/index.h — differentiable indexing ops as free functions.
#pragma once

#include "core/tensor.h"

namespace kiln {

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
/// torch.masked_select: x's elements where the Bool `mask` (broadcast with x) is true, 1-D.
Tensor masked_select(const Tensor& x, const Tensor& mask);
/// torch.nonzero: Int64 [count, x.dim()], the positions of x's nonzero elements.
Tensor nonzero(const Tensor& x);
/// Int64 [..., num_classes] with a 1 at each index (num_classes = max + 1 when -1).
Tensor one_hot(const Tensor& indices, std::int64_t num_classes = -1);

}  // namespace kiln
