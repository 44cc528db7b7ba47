// core/eigen.h — zero-copy tensors over Eigen matrices. Eigen stores column-major by
// default, so a 2x3 Eigen::MatrixXf becomes a tensor with strides [1, 2]: the same bytes,
// seen as a non-contiguous (transposed-layout) view. `is_contiguous()` says so, and
// `contiguous()` makes a row-major copy when a kernel needs one.
//
//   auto m = std::make_shared<Eigen::MatrixXf>(Eigen::MatrixXf::Random(2, 3));
//   kiln::Tensor t = kiln::from_eigen(m);   // shares m's buffer, keeps m alive
//   t.is_contiguous();                      // false: column-major
//
// Read next: core/creation.h.
#pragma once

#include <Eigen/Core>
#include <memory>

#include "core/creation.h"

namespace kiln {

/// Shares the matrix's buffer (no copy) and keeps the matrix alive while any view uses it.
template <class S, int R, int C, int O, int MR, int MC>
Tensor from_eigen(std::shared_ptr<Eigen::Matrix<S, R, C, O, MR, MC>> m, TensorOptions options = {},
                  std::source_location loc = std::source_location::current()) {
  const std::int64_t rows = m->rows(), cols = m->cols();
  const bool row_major = (O & Eigen::RowMajor) != 0;
  const Shape strides = row_major ? Shape{cols, 1} : Shape{1, rows};
  S* data = m->data();
  detail::check_blob_dtype(dtype_v<S>, options);
  return detail::tensor_from_memory(data, dtype_v<S>, {rows, cols}, IntArrayRef(strides),
                                    std::move(m), MemoryOrigin::ZeroCopy, options, loc,
                                    "from_eigen");
}

/// Takes the matrix (moved, no copy of its elements) and shares its buffer.
template <class S, int R, int C, int O, int MR, int MC>
Tensor as_tensor(Eigen::Matrix<S, R, C, O, MR, MC>&& m, TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  return from_eigen(std::make_shared<Eigen::Matrix<S, R, C, O, MR, MC>>(std::move(m)), options, loc);
}

}  // namespace kiln
