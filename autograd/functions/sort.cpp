// autograd/functions/sort.cpp — sort, topk, kthvalue and mode: the order comes from the index
// kernel (core/ops/sort.h) and the values are gathered at it, so the gradient flows back to
// the elements that were picked through gather's backward, with no formula of their own
// (tinygrad's habit: composites get their gradients for free).
// Read next: autograd/functions/index.cpp (gather).
#include "core/creation.h"
#include "core/ops/sort.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kiln {

ValuesIndices Tensor::sort(std::int64_t dim, bool descending) const {
  if (this->dim() == 0) return {*this, zeros({}, TensorOptions().dtype(kInt64).device(device()))};
  const Tensor indices = ops::sort_indices(*this, dim, descending);
  return {this->gather(dim, indices), indices};
}

ValuesIndices Tensor::topk(std::int64_t k, std::int64_t dim, bool largest, bool sorted) const {
  const std::int64_t d = wrap_dim(dim, std::max<std::int64_t>(this->dim(), 1));
  const std::int64_t n = this->dim() == 0 ? 1 : size(d);
  KILN_CHECK_INDEX(k >= 0 && k <= n, "selected index k out of range");
  // A sorted order is also the order PyTorch's sorted=true gives; sorted=false allows any.
  (void)sorted;
  if (this->dim() == 0) return sort(dim, largest);
  const Tensor indices = ops::sort_indices(*this, d, largest).narrow(d, 0, k);
  return {this->gather(d, indices), indices};
}

ValuesIndices Tensor::kthvalue(std::int64_t k, std::int64_t dim, bool keepdim) const {
  const std::int64_t d = wrap_dim(dim, std::max<std::int64_t>(this->dim(), 1));
  const std::int64_t n = this->dim() == 0 ? 1 : size(d);
  KILN_CHECK_INDEX(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", d);
  if (this->dim() == 0) return sort(dim, false);
  Tensor indices = ops::sort_indices(*this, d, false).narrow(d, k - 1, 1);
  Tensor values = this->gather(d, indices);
  if (!keepdim) {
    values = values.squeeze(d);
    indices = indices.squeeze(d);
  }
  return {values, indices};
}

ValuesIndices Tensor::mode(std::int64_t dim, bool keepdim) const {
  if (this->dim() == 0) return sort(dim, false);
  const std::int64_t d = wrap_dim(dim, this->dim());
  Tensor indices = ops::mode_indices(*this, d);
  Tensor values = this->gather(d, indices);
  if (!keepdim) {
    values = values.squeeze(d);
    indices = indices.squeeze(d);
  }
  return {values, indices};
}

}  // namespace kiln
