// autograd/functions/tensor_index.cpp — Tensor::index: Python's x[...] as a sequence of view
// ops (see core/tensor_index.h). Integers select (the dim goes away), slices keep the dim,
// None inserts one, Ellipsis stands for every dim the other entries do not name, and a 1-D
// Int64 tensor picks rows along its dim with index_select.
// Read next: autograd/functions/view.cpp.
#include <variant>

#include "core/tensor.h"

namespace kiln {

Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const {
  using namespace indexing;
  std::int64_t named = 0, ellipses = 0;
  for (const TensorIndex& i : indices) {
    const auto& v = i.value();
    if (std::holds_alternative<EllipsisIndex>(v)) ++ellipses;
    else if (!std::holds_alternative<NoneIndex>(v)) ++named;
  }
  KILN_CHECK_INDEX(ellipses <= 1, "an index can only have a single ellipsis ('...')");
  KILN_CHECK_INDEX(named <= dim(), "too many indices for tensor of dimension ", dim());
  Tensor result = *this;
  std::int64_t d = 0;  // the dim of `result` the next entry applies to
  for (const TensorIndex& i : indices) {
    const auto& v = i.value();
    if (const auto* n = std::get_if<std::int64_t>(&v)) {
      result = result.select(d, *n);
    } else if (const auto* s = std::get_if<Slice>(&v)) {
      result = result.slice(d, s->start, s->stop, s->step);
      ++d;
    } else if (std::holds_alternative<NoneIndex>(v)) {
      result = result.unsqueeze(d);
      ++d;
    } else if (std::holds_alternative<EllipsisIndex>(v)) {
      d += dim() - named;
    } else {
      const Tensor& t = std::get<Tensor>(v);
      KILN_CHECK_INDEX(t.defined() && t.dtype() == DType::Int64 && t.dim() == 1,
                       "tensors used as indices must be 1-D Int64 (long) tensors here, got ",
                       t.defined() ? detail::str_cat(t.dtype(), " of shape ", t.sizes()) : "an undefined tensor",
                       " (boolean masks: use masked_fill or where)");
      result = result.index_select(d, t);
      ++d;
    }
  }
  return result;
}

}  // namespace kiln
