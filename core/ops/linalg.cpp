// core/ops/linalg.cpp — raw mm and bmm.
#include "core/ops/linalg.h"

#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/checks.h"
#include "core/ops/view.h"

namespace kiln::ops {

namespace {

void check_same_dtype(const Tensor& a, const Tensor& b) {
  KILN_CHECK_TYPE(a.dtype() == b.dtype(), "mat1 and mat2 must have the same dtype, but got ",
                  scalar_type_name(a.dtype()), " and ", scalar_type_name(b.dtype()), " (",
                  msg::scalar_type(b.dtype(), a.dtype()), ")\n", msg::blame("mat1", a), "\n",
                  msg::blame("mat2", b));
}

/// mm's operands: two matrices whose shapes multiply, of one dtype.
void check_mm_operands(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 2, "self must be a matrix (got a ", a.dim(), "-D tensor)");
  KILN_CHECK(b.dim() == 2, "mat2 must be a matrix (got a ", b.dim(), "-D tensor)");
  KILN_CHECK(a.sizes()[1] == b.sizes()[0], msg::mm_shapes(a.sizes(), b.sizes()));
  check_same_dtype(a, b);
}

}  // namespace

Tensor bmm(const Tensor& a, const Tensor& b) {
  const Device device = common_device({{"self", &a}, {"mat2", &b}});
  KILN_CHECK(a.dim() == 3, "batch1 must be a 3D tensor (got ", a.dim(), "-D)");
  KILN_CHECK(b.dim() == 3, "batch2 must be a 3D tensor (got ", b.dim(), "-D)");
  KILN_CHECK(a.sizes()[0] == b.sizes()[0], "batch1 and batch2 must have same number of batches, got ",
             a.sizes()[0], " and ", b.sizes()[0]);
  KILN_CHECK(a.sizes()[2] == b.sizes()[1], "Expected size for first two dimensions of batch2 tensor to be: [",
             a.sizes()[0], ", ", a.sizes()[2], "] but got: [", b.sizes()[0], ", ", b.sizes()[1], "].");
  check_same_dtype(a, b);
  Tensor out = empty_output({a.sizes()[0], a.sizes()[1], b.sizes()[2]}, a.dtype(), device, "bmm");
  if (out.numel() == 0) return out;
  require_kernel(kernels_for(device.type()).bmm, "bmm", device)(out, a, b);
  return out;
}

Tensor mm(const Tensor& a, const Tensor& b) {
  common_device({{"self", &a}, {"mat2", &b}});
  check_mm_operands(a, b);
  return squeeze(bmm(unsqueeze(a, 0), unsqueeze(b, 0)), 0);
}

void mm_out(const Tensor& out, const Tensor& a, const Tensor& b) {
  const Device device = common_device({{"out", &out}, {"self", &a}, {"mat2", &b}});
  check_mm_operands(a, b);
  KILN_CHECK(out.sizes() == IntArrayRef({a.sizes()[0], b.sizes()[1]}) && out.dtype() == a.dtype() &&
                 out.is_contiguous(),
             "mm_out: expected a contiguous ", scalar_type_name(a.dtype()), " out of size [", a.sizes()[0], ", ",
             b.sizes()[1], "], got ", scalar_type_name(out.dtype()), " ", out.sizes());
  if (out.numel() == 0) return;
  require_kernel(kernels_for(device.type()).bmm, "mm", device)(unsqueeze(out, 0), unsqueeze(a, 0), unsqueeze(b, 0));
  out.impl()->storage()->bump_version();
}

}  // namespace kiln::ops
