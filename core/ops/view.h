// core/ops/view.h — raw view ops: each returns a tensor over the *same* storage (and so the
// same version counter) with new sizes, strides and offset. No data moves. reshape is the
// exception that proves the rule: it views when the strides allow and copies otherwise.
// See Note [Strides and views].
// Read next: core/ops/index.h.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace kiln::ops {

// Note [Strides and views]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// Element (i0, i1, ...) of a tensor lives at storage_offset + i0*stride0 + i1*stride1 + ...
// (strides in elements). Transpose swaps two strides; slicing with a step multiplies one;
// expand sets one to 0; select drops one and moves the offset. None of these copy, which is
// why a transposed HWC<->CHW image is "non-contiguous": its elements are not in row-major
// order in memory, and a kernel that needs them so (GEMM on some layouts, cuDNN, `view`)
// must first make a contiguous copy. view() refuses when no strides can describe the new
// shape over the old memory; reshape() then copies. See core/shape.h view_strides().

/// A view with explicit geometry; checks that it stays inside the storage.
Tensor as_strided(const Tensor& x, IntArrayRef sizes, IntArrayRef strides, std::int64_t offset,
                  const char* api = "as_strided");
Tensor view(const Tensor& x, IntArrayRef sizes);
Tensor reshape(const Tensor& x, IntArrayRef sizes);
Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1);
Tensor permute(const Tensor& x, IntArrayRef dims);
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, std::int64_t dim);
Tensor expand(const Tensor& x, IntArrayRef sizes);
Tensor slice(const Tensor& x, std::int64_t dim, std::optional<std::int64_t> start,
             std::optional<std::int64_t> end, std::int64_t step);
Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length);
Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index);
Tensor diagonal(const Tensor& x, std::int64_t offset, std::int64_t dim1, std::int64_t dim2);

/// The sizes `expand` will produce (resolving -1), or PyTorch's error.
Shape expanded_sizes(IntArrayRef sizes, IntArrayRef target);

}  // namespace kiln::ops
