// core/ops/view.cpp — raw views (see core/ops/view.h and Note [Strides and views]).
#include "core/ops/view.h"

#include <algorithm>

#include "core/ops/allocate.h"
#include "core/ops/copy.h"

namespace kiln::ops {

Tensor as_strided(const Tensor& x, IntArrayRef sizes, IntArrayRef strides, std::int64_t offset,
                  const char* api) {
  KILN_CHECK(sizes.size() == strides.size(), "mismatch in length of strides and shape");
  KILN_CHECK(offset >= 0, "Tensor: invalid storage offset ", offset);
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    KILN_CHECK(sizes[d] >= 0, "Trying to create tensor with negative dimension ", sizes[d]);
    KILN_CHECK(strides[d] >= 0, "as_strided: Negative strides are not supported at the moment, "
               "got strides: ", strides);
  }
  if (compute_numel(sizes) > 0 && has_data(x.device())) {
    std::int64_t last = offset;
    for (std::size_t d = 0; d < sizes.size(); ++d) last += (sizes[d] - 1) * strides[d];
    const auto nbytes = x.impl()->storage()->nbytes();
    KILN_CHECK(static_cast<std::size_t>(last + 1) * x.element_size() <= nbytes, "setStorage: sizes ",
               sizes, ", strides ", strides, " and storage offset ", offset, " require a storage of ",
               (last + 1) * static_cast<std::int64_t>(x.element_size()),
               " bytes, but the storage has only ", nbytes, " bytes");
  }
  return make_view(x, sizes, strides, offset, api);
}

Tensor view(const Tensor& x, IntArrayRef sizes) {
  const Shape shape = infer_size(sizes, x.numel());
  const auto strides = view_strides(x.sizes(), x.strides(), shape);
  KILN_CHECK(strides.has_value(), msg::view_incompatible());
  return make_view(x, shape, *strides, x.storage_offset(), "view");
}

Tensor reshape(const Tensor& x, IntArrayRef sizes) {
  const Shape shape = infer_size(sizes, x.numel());
  if (const auto strides = view_strides(x.sizes(), x.strides(), shape)) {
    return make_view(x, shape, *strides, x.storage_offset(), "reshape");
  }
  Tensor copy = clone(x);
  return make_view(copy, shape, contiguous_strides(shape), 0, "reshape");
}

Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1) {
  const std::int64_t a = wrap_dim(dim0, x.dim()), b = wrap_dim(dim1, x.dim());
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  if (x.dim() > 0) {
    std::swap(sizes[a], sizes[b]);
    std::swap(strides[a], strides[b]);
  }
  return make_view(x, sizes, strides, x.storage_offset(), "transpose");
}

Tensor permute(const Tensor& x, IntArrayRef dims) {
  KILN_CHECK(static_cast<std::int64_t>(dims.size()) == x.dim(),
             "permute(): number of dimensions in the tensor input does not match the length of "
             "the desired ordering of dimensions i.e. input.dim() = ", x.dim(),
             " is not equal to len(dims) = ", dims.size());
  Shape sizes(dims.size()), strides(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = wrap_dim(dims[i], x.dim());
    KILN_CHECK(!seen[static_cast<std::size_t>(d)], "permute(): duplicate dims are not allowed.");
    seen[static_cast<std::size_t>(d)] = true;
    sizes[i] = x.sizes()[d];
    strides[i] = x.strides()[d];
  }
  return make_view(x, sizes, strides, x.storage_offset(), "permute");
}

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim() + 1);
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  const std::int64_t stride = d >= x.dim() ? 1 : sizes[d] * strides[d];
  sizes.insert(sizes.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  return make_view(x, sizes, strides, x.storage_offset(), "unsqueeze");
}

Tensor squeeze(const Tensor& x) {
  Shape sizes, strides;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (x.sizes()[d] == 1) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  return make_view(x, sizes, strides, x.storage_offset(), "squeeze");
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim());
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  if (x.dim() > 0 && sizes[d] == 1) {
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
  }
  return make_view(x, sizes, strides, x.storage_offset(), "squeeze");
}

Shape expanded_sizes(IntArrayRef sizes, IntArrayRef target) {
  KILN_CHECK(target.size() >= sizes.size(), "expand(", "Tensor{", sizes,
             "}, size=", target, "): the number of sizes provided (", target.size(),
             ") must be greater or equal to the number of dimensions in the tensor (",
             sizes.size(), ")");
  Shape out(target.size());
  const std::size_t lead = target.size() - sizes.size();
  for (std::size_t i = 0; i < target.size(); ++i) {
    const std::int64_t want = target[i];
    if (i < lead) {
      KILN_CHECK(want >= 0, "The expanded size of the tensor (", want,
                 ") isn't allowed in a leading, non-existing dimension ", i);
      out[i] = want;
      continue;
    }
    const std::int64_t have = sizes[i - lead];
    if (want == -1) {
      out[i] = have;
    } else {
      KILN_CHECK(have == want || have == 1, "The expanded size of the tensor (", want,
                 ") must match the existing size (", have, ") at non-singleton dimension ", i,
                 ".  Target sizes: ", target, ".  Tensor sizes: ", sizes);
      out[i] = want;
    }
  }
  return out;
}

Tensor expand(const Tensor& x, IntArrayRef target) {
  const Shape sizes = expanded_sizes(x.sizes(), target);
  const std::size_t lead = sizes.size() - static_cast<std::size_t>(x.dim());
  Shape strides(sizes.size(), 0);
  for (std::size_t i = lead; i < sizes.size(); ++i) {
    const std::int64_t have = x.sizes()[i - lead];
    strides[i] = (have == 1 && sizes[i] != 1) ? 0 : x.strides()[i - lead];
  }
  return make_view(x, sizes, strides, x.storage_offset(), "expand");
}

Tensor slice(const Tensor& x, std::int64_t dim, std::optional<std::int64_t> start,
             std::optional<std::int64_t> end, std::int64_t step) {
  KILN_CHECK_INDEX(x.dim() > 0, "slice() cannot be applied to a 0-dim tensor.");
  KILN_CHECK_VALUE(step > 0, "slice step must be positive");
  const std::int64_t d = wrap_dim(dim, x.dim());
  const std::int64_t n = x.sizes()[d];
  // Python's slice rules: negative bounds count from the end, out-of-range bounds clamp.
  auto clamp_bound = [n](std::int64_t v) {
    if (v < 0) v += n;
    return std::clamp<std::int64_t>(v, 0, n);
  };
  const std::int64_t b = start ? clamp_bound(*start) : 0;
  const std::int64_t e = std::max(b, end ? clamp_bound(*end) : n);
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  sizes[d] = (e - b + step - 1) / step;
  strides[d] *= step;
  return make_view(x, sizes, strides, x.storage_offset() + b * x.strides()[d], "slice");
}

Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  KILN_CHECK_INDEX(x.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  const std::int64_t d = wrap_dim(dim, x.dim());
  const std::int64_t n = x.sizes()[d];
  KILN_CHECK_INDEX(start >= -n && start <= n, "start out of range (expected to be in range of [",
                   -n, ", ", n, "], but got ", start, ")");
  if (start < 0) start += n;
  KILN_CHECK(length >= 0 && start <= n - length, "start (", start, ") + length (", length,
             ") exceeds dimension size (", n, ").");
  Shape sizes = x.sizes().vec();
  sizes[d] = length;
  return make_view(x, sizes, x.strides(), x.storage_offset() + start * x.strides()[d], "narrow");
}

Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index) {
  KILN_CHECK_INDEX(x.dim() > 0, "select() cannot be applied to a 0-dim tensor.");
  const std::int64_t d = wrap_dim(dim, x.dim());
  const std::int64_t n = x.sizes()[d];
  KILN_CHECK_INDEX(index >= -n && index < n, "select(): index ", index,
                   " out of range for tensor of size ", x.sizes(), " at dimension ", d);
  if (index < 0) index += n;
  Shape sizes = x.sizes().vec(), strides = x.strides().vec();
  const std::int64_t offset = x.storage_offset() + index * strides[d];
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  return make_view(x, sizes, strides, offset, "select");
}

Tensor diagonal(const Tensor& x, std::int64_t offset, std::int64_t dim1, std::int64_t dim2) {
  KILN_CHECK(x.dim() >= 2, "diagonal dimensions requires at least 2 dims (got ", x.dim(), ")");
  const std::int64_t a = wrap_dim(dim1, x.dim()), b = wrap_dim(dim2, x.dim());
  KILN_CHECK(a != b, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  std::int64_t start = x.storage_offset();
  std::int64_t len;
  if (offset >= 0) {
    len = std::max<std::int64_t>(std::min(x.sizes()[a], x.sizes()[b] - offset), 0);
    if (len > 0) start += offset * x.strides()[b];
  } else {
    len = std::max<std::int64_t>(std::min(x.sizes()[a] + offset, x.sizes()[b]), 0);
    if (len > 0) start -= offset * x.strides()[a];
  }
  Shape sizes, strides;
  for (std::int64_t d = 0; d < x.dim(); ++d) {
    if (d == a || d == b) continue;
    sizes.push_back(x.sizes()[d]);
    strides.push_back(x.strides()[d]);
  }
  sizes.push_back(len);
  strides.push_back(x.strides()[a] + x.strides()[b]);
  return make_view(x, sizes, strides, start, "diagonal");
}

}  // namespace kiln::ops
