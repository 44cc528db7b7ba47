// core/shape.cpp — shape arithmetic (see core/shape.h).
#include "core/shape.h"

#include <algorithm>

#include "core/error.h"
#include "core/messages.h"

namespace kiln {

Shape contiguous_strides(IntArrayRef sizes) {
  Shape strides(sizes.size());
  std::int64_t stride = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<std::int64_t>(sizes[i], 1);
  }
  return strides;
}

std::int64_t compute_numel(IntArrayRef sizes) {
  // A zero anywhere makes the product 0, however large the other sizes (an expand of an
  // empty tensor); otherwise a product past int64 is PyTorch's error, never a wrapped count
  // (a wrapped count can be 0, and an op would then treat a huge view as empty).
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return 0;
  std::int64_t n = 1;
  bool overflowed = false;
  for (auto s : sizes) overflowed |= __builtin_mul_overflow(n, s, &n);
  KILN_CHECK(!overflowed, "numel: integer multiplication overflow");
  return n;
}

std::int64_t multiply_sizes(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t product = 0;
  KILN_CHECK_VALUE(!__builtin_mul_overflow(a, b, &product), what, " = ", a, " * ", b, " does not fit in int64");
  return product;
}

DimSplit split_at_dim(IntArrayRef sizes, std::int64_t dim) {
  DimSplit s;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(sizes.size()); ++d) {
    if (d < dim) s.outer *= sizes[d];
    else if (d == dim) s.size = sizes[d];
    else s.inner *= sizes[d];
  }
  return s;
}

std::size_t storage_nbytes(IntArrayRef sizes, std::size_t itemsize) {
  std::int64_t extent = 1;  // product of max(size, 1): what the strides reach
  std::int64_t numel = 1;
  bool ok = true;
  for (auto s : sizes) {
    KILN_CHECK_VALUE(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", sizes);
    ok = ok && !__builtin_mul_overflow(extent, std::max<std::int64_t>(s, 1), &extent);
    numel *= s == 0 ? 0 : 1;
  }
  std::int64_t bytes = 0;
  ok = ok && !__builtin_mul_overflow(extent, static_cast<std::int64_t>(itemsize), &bytes);
  KILN_CHECK_VALUE(ok, "Storage size calculation overflowed with sizes=", sizes);
  return numel == 0 ? 0 : static_cast<std::size_t>(bytes);
}

bool compute_is_contiguous(IntArrayRef sizes, IntArrayRef strides) {
  if (compute_numel(sizes) == 0) return true;
  std::int64_t expected = 1;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

std::int64_t wrap_dim(std::int64_t dim, std::int64_t ndim) {
  const std::int64_t n = ndim == 0 ? 1 : ndim;
  KILN_CHECK_INDEX(dim >= -n && dim < n, msg::dim_out_of_range(dim, ndim));
  return dim < 0 ? dim + n : dim;
}

Shape wrap_dims(IntArrayRef dims, std::int64_t ndim) {
  Shape out;
  if (dims.empty()) {
    for (std::int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (auto d : dims) {
    const std::int64_t w = wrap_dim(d, ndim);
    KILN_CHECK(std::find(out.begin(), out.end(), w) == out.end(), "dim ", w,
               " appears multiple times in the list of dims");
    out.push_back(ndim == 0 ? 0 : w);
  }
  std::sort(out.begin(), out.end());
  if (ndim == 0) out.clear();
  return out;
}

Shape broadcast_shapes(IntArrayRef a, IntArrayRef b) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t offset = static_cast<std::int64_t>(n - 1 - i);
    const std::int64_t da = static_cast<std::int64_t>(a.size()) - 1 - offset;
    const std::int64_t db = static_cast<std::int64_t>(b.size()) - 1 - offset;
    const std::int64_t sa = da >= 0 ? a[da] : 1;
    const std::int64_t sb = db >= 0 ? b[db] : 1;
    KILN_CHECK(sa == sb || sa == 1 || sb == 1,
               msg::broadcast_mismatch(sa, sb, static_cast<std::int64_t>(i)));
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Shape infer_size(IntArrayRef shape, std::int64_t numel) {
  Shape out = shape.vec();
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      KILN_CHECK(!infer, "only one dimension can be inferred");
      infer = i;
    } else {
      KILN_CHECK(out[i] >= 0, "invalid shape dimension ", out[i]);
      known *= out[i];
    }
  }
  if (infer) {
    KILN_CHECK(known != 0 && numel % known == 0, msg::invalid_shape(shape, numel));
    out[*infer] = numel / known;
  } else {
    KILN_CHECK(known == numel, msg::invalid_shape(shape, numel));
  }
  return out;
}

std::optional<Shape> view_strides(IntArrayRef sizes, IntArrayRef strides,
                                  IntArrayRef new_sizes) {
  Shape new_strides(new_sizes.size());
  if (sizes.empty()) {
    std::fill(new_strides.begin(), new_strides.end(), 1);
    return new_strides;
  }
  const std::int64_t numel = compute_numel(sizes);
  if (numel == 0) {
    if (sizes == new_sizes) return strides.vec();
    // Any strides work for an empty tensor: use contiguous ones.
    std::int64_t stride = 1;
    for (std::size_t i = new_sizes.size(); i-- > 0;) {
      new_strides[i] = stride;
      stride *= std::max<std::int64_t>(new_sizes[i], 1);
    }
    return new_strides;
  }
  // Walk the old dims from the back, grouping runs that are contiguous with each other
  // ("chunks"); each chunk may be re-split into new dims of the same total size.
  std::int64_t view_d = static_cast<std::int64_t>(new_sizes.size()) - 1;
  std::int64_t chunk_base_stride = strides.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(sizes.size()) - 1; tensor_d >= 0;
       --tensor_d) {
    tensor_numel *= sizes[tensor_d];
    const bool chunk_ends =
        tensor_d == 0 ||
        (sizes[tensor_d - 1] != 1 && strides[tensor_d - 1] != tensor_numel * chunk_base_stride);
    if (chunk_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace kiln
