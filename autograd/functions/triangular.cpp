// autograd/functions/triangular.cpp — triu and tril as masked_fill with a mask from two aranges
// (column - row against the diagonal), so the gradient is masked_fill's: no formula of its own.
#include "autograd/functions/triangular.h"

#include "autograd/functions/index.h"
#include "core/creation.h"
#include "core/error.h"

namespace kiln {

namespace {

/// column - row for the last two dims of x, as [rows, cols] Int64.
Tensor diagonal_offsets(const Tensor& x, const char* op) {
  KILN_CHECK(x.dim() >= 2, op, ": input tensor must have at least 2 dimensions");
  const std::int64_t rows = x.sizes()[x.dim() - 2], cols = x.sizes().back();
  const TensorOptions index = TensorOptions().dtype(kInt64).device(x.device());
  return arange(cols, index).unsqueeze(0) - arange(rows, index).unsqueeze(1);
}

}  // namespace

Tensor triu(const Tensor& x, std::int64_t diagonal) {
  return masked_fill(x, diagonal_offsets(x, "triu").lt(diagonal), 0);
}

Tensor tril(const Tensor& x, std::int64_t diagonal) {
  return masked_fill(x, diagonal_offsets(x, "tril").gt(diagonal), 0);
}

Tensor Tensor::triu(std::int64_t diagonal) const { return kiln::triu(*this, diagonal); }
Tensor Tensor::tril(std::int64_t diagonal) const { return kiln::tril(*this, diagonal); }

}  // namespace kiln
