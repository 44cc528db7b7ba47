// core/ops/index.cpp — raw cat and index ops (see core/ops/index.h).
#include "core/ops/index.h"

#include <vector>

#include "core/capture_hooks.h"
#include "core/dispatch.h"
#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/checks.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"
#include "core/type_promotion.h"

namespace kiln::ops {

Tensor cat(const TensorList& tensors, std::int64_t dim) {
  KILN_CHECK(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // PyTorch skips legacy empty 1-D tensors of size [0] when sizing the result.
  const Tensor* ref = nullptr;
  for (const Tensor& t : tensors) {
    if (!(t.dim() == 1 && t.numel() == 0)) {
      ref = &t;
      break;
    }
  }
  if (ref == nullptr) ref = &tensors.front();
  KILN_CHECK(ref->dim() > 0, "zero-dimensional tensor (at position 0) cannot be concatenated");
  const std::int64_t d = wrap_dim(dim, ref->dim());
  DType dtype = tensors.front().dtype();
  const Device device = tensors.front().device();
  Shape shape = ref->sizes().vec();
  shape[d] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    KILN_CHECK(t.device() == device, msg::same_device("tensors[0]", tensors.front(), "tensors[i]", t));
    dtype = promote_types(dtype, t.dtype());
    if (t.dim() == 1 && t.numel() == 0 && ref->dim() != 1) continue;
    KILN_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ", ref->dim(),
               " and ", t.dim());
    for (std::int64_t k = 0; k < t.dim(); ++k) {
      if (k == d) continue;
      KILN_CHECK(t.sizes()[k] == ref->sizes()[k], "Sizes of tensors must match except in dimension ",
                 d, ". Expected size ", ref->sizes()[k], " but got size ", t.sizes()[k],
                 " for tensor number ", i, " in the list.");
    }
    shape[d] += t.sizes()[d];
  }
  Tensor out = empty_output(shape, dtype, device, "cat");
  TensorList parts;
  for (const Tensor& t : tensors) {
    if (t.dim() == 1 && t.numel() == 0 && ref->dim() != 1) continue;
    parts.push_back(to_dtype(t, dtype));
  }
  require_kernel(kernels_for(device.type()).cat, "cat", device)(out, parts, d);
  return out;
}

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  common_device({{"self", &x}, {"index", &index}});
  check_index_dtype("index_select", index);
  KILN_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  const std::int64_t d = wrap_dim(dim, x.dim());
  const std::int64_t size = x.dim() == 0 ? 1 : x.sizes()[d];
  check_index_range(index, d, size);
  Shape shape = x.sizes().vec();
  if (x.dim() > 0) shape[d] = index.numel();
  Tensor out = empty_output(shape, x.dtype(), x.device(), "index_select");
  if (out.numel() == 0) return out;
  const Tensor xc = contiguous(x.dim() == 0 ? reshape(x, {1}) : x);
  require_kernel(kernels_for(x.device().type()).index_select, "index_select", x.device())(
      x.dim() == 0 ? reshape(out, {index.numel()}) : out, xc, x.dim() == 0 ? 0 : d,
      contiguous(reshape(index, {-1})));
  return out;
}

Tensor index_add(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& source) {
  common_device({{"self", &self}, {"index", &index}, {"source", &source}});
  check_index_dtype("index_add", index);
  KILN_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  KILN_CHECK(self.dtype() == source.dtype(), "index_add_(): self (", scalar_type_name(self.dtype()),
             ") and source (", scalar_type_name(source.dtype()), ") must have the same scalar type");
  const std::int64_t d = wrap_dim(dim, std::max<std::int64_t>(self.dim(), 1));
  KILN_CHECK_INDEX(source.dim() == self.dim() && (self.dim() == 0 || source.sizes()[d] == index.numel()),
                   "index_add_(): Number of indices (", index.numel(),
                   ") should be equal to source.size(dim) and source must match self's rank");
  const std::int64_t size = self.dim() == 0 ? 1 : self.sizes()[d];
  check_index_range(index, d, size);
  Tensor out = clone(self);
  if (index.numel() == 0) return out;
  require_kernel(kernels_for(self.device().type()).index_add, "index_add", self.device())(
      self.dim() == 0 ? reshape(out, {1}) : out, d, contiguous(reshape(index, {-1})),
      contiguous(self.dim() == 0 ? reshape(source, {1}) : source));
  return out;
}

namespace {

void check_index_shape(const char* op, const Tensor& self, std::int64_t d, const Tensor& index,
                       const Tensor* src) {
  KILN_CHECK(self.dim() > 0, op, " on a 0-dim tensor is not supported; reshape it to [1] first");
  KILN_CHECK(index.dim() == self.dim(), op,
             "(): Index tensor must have the same number of dimensions as ",
             src ? "self tensor" : "input tensor");
  for (std::int64_t k = 0; k < index.dim(); ++k) {
    KILN_CHECK(k == d || index.sizes()[k] <= self.sizes()[k], op,
               "(): Size does not match at dimension ", k, " expected index ", index.sizes(),
               " to be smaller than self ", self.sizes(), " apart from dimension ", d);
    KILN_CHECK(src == nullptr || index.sizes()[k] <= src->sizes()[k], op, "(): Expected index ",
               index.sizes(), " to be smaller than self ", self.sizes(), " apart from dimension ",
               d, " and to be smaller size than src ", src->sizes());
  }
}

}  // namespace

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  common_device({{"self", &x}, {"index", &index}});
  check_index_dtype("gather", index);
  const std::int64_t d = wrap_dim(dim, x.dim());
  check_index_shape("gather", x, d, index, nullptr);
  check_index_range(index, d, x.sizes()[d]);
  Tensor out = empty_output(index.sizes(), x.dtype(), x.device(), "gather");
  if (out.numel() == 0) return out;
  require_kernel(kernels_for(x.device().type()).gather, "gather", x.device())(out, x, d, index);
  return out;
}

Tensor scatter(const Tensor& self, std::int64_t dim, const Tensor& index, const Tensor& src,
               bool accumulate) {
  common_device({{"self", &self}, {"index", &index}, {"src", &src}});
  check_index_dtype(accumulate ? "scatter_add" : "scatter", index);
  const char* op = accumulate ? "scatter_add" : "scatter";
  const std::int64_t d = wrap_dim(dim, self.dim());
  // A 0-dim src (scatter's value, a wrapped number) may sit on the CPU beside a CUDA self: the
  // kernel reads it as an expanded tensor, so it moves to self's device first.
  const Tensor source = src.dim() == 0
                            ? expand(to_device(to_dtype(src, self.dtype()), self.device(), false), index.sizes())
                            : to_dtype(src, self.dtype());
  KILN_CHECK(source.dim() == index.dim(), op,
             "(): Index tensor must have the same number of dimensions as src tensor");
  check_index_shape(op, self, d, index, &source);
  check_index_range(index, d, self.sizes()[d]);
  Tensor out = clone(self);
  if (index.numel() == 0) return out;
  require_kernel(kernels_for(self.device().type()).scatter, "scatter", self.device())(
      out, d, index, source, accumulate);
  return out;
}

Tensor nonzero(const Tensor& x, std::source_location where) {
  if (capture::observer()) capture::host_access(x, "nonzero", where);
  KILN_CHECK(!x.device().is_meta(), "nonzero: the number of nonzero elements of a meta tensor is unknown "
                                    "(meta tensors have shapes and dtypes but no data)");
  if (!x.device().is_cpu()) return to_device(nonzero(to_device(x, kCPU, false), where), x.device(), false);
  const Tensor c = contiguous(x);
  const std::int64_t n = c.numel(), dims = c.dim();
  std::vector<std::int64_t> positions;
  dispatch_dtype<AllTypes>(c.dtype(), "nonzero_cpu", [&]<typename T>() {
    const T* data = c.data_ptr<T>();
    for (std::int64_t i = 0; i < n; ++i) {
      if (data[i] != T(0)) positions.push_back(i);  // NaN != 0
    }
  });
  const std::int64_t count = static_cast<std::int64_t>(positions.size());
  const Tensor out = empty_output({count, dims}, DType::Int64, kCPU, "nonzero");
  std::int64_t* rows = out.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < count; ++r) {
    std::int64_t flat = positions[static_cast<std::size_t>(r)];
    for (std::int64_t d = dims - 1; d >= 0; --d) {
      rows[r * dims + d] = flat % c.sizes()[d];
      flat /= c.sizes()[d];
    }
  }
  return out;
}

}  // namespace kiln::ops
