// core/shape.h — shape arithmetic shared by every op: wrapping negative dims, broadcasting,
// inferring a -1 in a new shape, and the stride rule that decides when a view is possible.
// Read next: core/ops/view.h (views built on these rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/array_ref.h"

namespace kiln {

/// Strides of a row-major (C-contiguous) tensor of these sizes.
Shape contiguous_strides(IntArrayRef sizes);
/// Product of sizes (1 for a 0-d tensor, 0 when any size is 0), or PyTorch's "numel: integer
/// multiplication overflow" when it does not fit in int64 (a view can be that large: an expand
/// allocates nothing).
std::int64_t compute_numel(IntArrayRef sizes);
/// a * b for a size built from a user's numbers (LSTM's 4 * hidden_size, attention's
/// 3 * embed_dim), or a ValueError naming both ("<what> = 4 * 4611686018427387904 does not fit
/// in int64") instead of a wrapped product that could pass every later check.
std::int64_t multiply_sizes(std::int64_t a, std::int64_t b, const char* what);
/// Bytes a contiguous tensor of these sizes needs, or PyTorch's "Storage size calculation
/// overflowed with sizes=[...]" when the shape cannot exist (checked in 64 bits, including the
/// strides of an empty tensor, whose dims still multiply).
std::size_t storage_nbytes(IntArrayRef sizes, std::size_t itemsize);
/// PyTorch's rule: size-1 dims may have any stride; an empty tensor is contiguous.
bool compute_is_contiguous(IntArrayRef sizes, IntArrayRef strides);

/// Maps a possibly negative `dim` into [0, ndim); IndexError "Dimension out of range ..."
/// otherwise. A 0-d tensor accepts -1 and 0 (PyTorch's wrap_scalar rule).
std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim);

/// A contiguous shape seen as [outer, size, inner] around `dim`: the product of the sizes
/// before it, its own size, and the product of those after it (how index kernels walk a dim).
struct DimSplit {
  std::int64_t outer = 1, size = 1, inner = 1;
};
DimSplit split_at_dim(IntArrayRef sizes, std::int64_t dim);

/// Sorted, de-duplicated, wrapped dims; an empty list means "all dims".
/// Throws "dim 1 appears multiple times in the list of dims".
Shape wrap_dims(IntArrayRef dims, std::int64_t ndim);

/// The broadcast shape of a and b (numpy rules), or PyTorch's "The size of tensor a (3) must
/// match the size of tensor b (4) at non-singleton dimension 1".
Shape broadcast_shapes(IntArrayRef a, IntArrayRef b);

/// Resolves one -1 in `shape` so that it holds `numel` elements.
Shape infer_size(IntArrayRef shape, std::int64_t numel);

/// Strides that let a tensor with (sizes, strides) be viewed as `new_sizes` without copying,
/// or nullopt when the memory layout does not allow it (then reshape copies). This is
/// PyTorch's computeStride: dims may merge only when they are contiguous with each other.
std::optional<Shape> view_strides(IntArrayRef sizes, IntArrayRef strides, IntArrayRef new_sizes);

}  // namespace kiln
