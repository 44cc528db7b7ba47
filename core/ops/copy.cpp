// core/ops/copy.cpp — raw copies (see core/ops/copy.h).
#include "core/ops/copy.h"

#include "core/cuda/cuda.h"
#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/checks.h"

namespace kiln::ops {

void check_no_internal_overlap(const Tensor& t) {
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    KILN_CHECK(!(t.strides()[d] == 0 && t.sizes()[d] > 1),
               "unsupported operation: more than one element of the written-to tensor refers to "
               "a single memory location. Please clone() the tensor before performing the "
               "operation.");
  }
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = empty_output(x.sizes(), dtype, x.device(), "to");
  require_kernel(kernels_for(x.device().type()).copy, "to", x.device())(out, x);
  return out;
}

Tensor to_device(const Tensor& x, Device device, bool non_blocking) {
  if (device.is_cuda() && !device.has_index()) device = Device(DeviceType::CUDA, cuda::current_device());
  if (x.device() == device) return x;
  Tensor out = empty_output(x.sizes(), x.dtype(), device, "to");
  copy_data(out, x, non_blocking);
  return out;
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

Tensor clone(const Tensor& x) {
  Tensor out = empty_output(x.sizes(), x.dtype(), x.device(), "clone");
  require_kernel(kernels_for(x.device().type()).copy, "clone", x.device())(out, x);
  return out;
}

void copy_(const Tensor& dst, const Tensor& src, bool non_blocking) {
  check_no_internal_overlap(dst);
  copy_data(dst, src, non_blocking);
  dst.impl()->storage()->bump_version();
}

void copy_data(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Shape shape = broadcast_shapes(dst.sizes(), src.sizes());
  KILN_CHECK(IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
             " doesn't match the broadcast shape ", IntArrayRef(shape));
  if (dst.device() == src.device()) {
    Tensor source = src;
    if (src.shares_memory(dst) && !src.is_same(dst)) source = clone(src);
    require_kernel(kernels_for(dst.device().type()).copy, "copy_", dst.device())(dst, source);
    return;
  }
  // Across devices: bytes move contiguous and in the destination's dtype; conversion and
  // broadcasting happen on whichever side is convenient. The meta device keeps no bytes:
  // nothing moves onto it, and nothing can come off it.
  KILN_CHECK_NOT_IMPLEMENTED(!src.is_meta(), "Cannot copy out of meta tensor; no data!");
  if (dst.is_meta()) return;
  Tensor staged = contiguous(to_dtype(src, dst.dtype()));
  if (IntArrayRef(staged.sizes()) != dst.sizes() || !dst.is_contiguous()) {
    Tensor landing = empty_output(staged.sizes(), dst.dtype(), dst.device(), "copy_");
    cuda::copy_bytes(landing.raw_data_ptr(), dst.device(), staged.raw_data_ptr(), staged.device(),
                     staged.nbytes(), false);
    require_kernel(kernels_for(dst.device().type()).copy, "copy_", dst.device())(dst, landing);
    return;
  }
  cuda::copy_bytes(dst.raw_data_ptr(), dst.device(), staged.raw_data_ptr(), staged.device(),
                   staged.nbytes(), non_blocking);
}

void fill_(const Tensor& dst, const Scalar& value) {
  check_no_internal_overlap(dst);
  fill_data(dst, value);
  dst.impl()->storage()->bump_version();
}

void fill_data(const Tensor& dst, const Scalar& value) {
  require_kernel(kernels_for(dst.device().type()).fill, "fill_", dst.device())(dst, value);
}

}  // namespace kiln::ops
