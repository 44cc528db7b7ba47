// core/ops/softmax.cpp — the raw fused softmax: checks, then the device's kernel.
#include "core/ops/softmax.h"

#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/fused_rows.h"

namespace kiln::ops {

namespace {

const SoftmaxKernels& kernels_of(const Tensor& t) { return fused_kernels_of(t, &BackendKernels::softmax); }

}  // namespace

bool can_fuse_softmax(const Tensor& x) { return has_fused_kernel(x, &BackendKernels::softmax); }

Tensor softmax(const Tensor& x, std::int64_t dim, bool log) {
  const char* op = log ? "_log_softmax" : "_softmax";
  const std::int64_t d = wrap_dim(dim, std::max<std::int64_t>(x.dim(), 1));
  const auto forward = require_kernel(kernels_of(x).forward, op, x.device());
  const Tensor input = ops::contiguous(x);
  Tensor out = empty_output(x.sizes(), x.dtype(), x.device(), op);
  if (x.numel() > 0) forward(out, input, x.dim() == 0 ? 0 : d, log);
  return out;
}

Tensor softmax_backward(const Tensor& grad_output, const Tensor& y, std::int64_t dim, bool log) {
  const char* op = log ? "_log_softmax_backward_data" : "_softmax_backward_data";
  KILN_CHECK(grad_output.sizes() == y.sizes() && grad_output.dtype() == y.dtype() &&
                 grad_output.device() == y.device(),
             op, ": expected grad_output like the output (", scalar_type_name(y.dtype()), " ", y.sizes(), " on ",
             y.device(), "), got ", scalar_type_name(grad_output.dtype()), " ", grad_output.sizes(), " on ",
             grad_output.device());
  const std::int64_t d = wrap_dim(dim, std::max<std::int64_t>(y.dim(), 1));
  const auto backward = require_kernel(kernels_of(y).backward, op, y.device());
  const Tensor g = ops::contiguous(grad_output), out = ops::contiguous(y);
  Tensor grad_input = empty_output(y.sizes(), y.dtype(), y.device(), op);
  if (y.numel() > 0) backward(grad_input, g, out, y.dim() == 0 ? 0 : d, log);
  return grad_input;
}

}  // namespace kiln::ops
