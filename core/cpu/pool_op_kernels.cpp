// core/cpu/pool_op_kernels.cpp — the CPU's pool kernels (PoolKernels in core/kernels.h),
// written with raw ops: the max from the CPU's max-pool kernel, averages as sums over unfolded
// windows. max_pool2d and avg_pool2d on the CPU keep their composite graphs; these serve the
// op-kernel route (core/backends.h) when a test turns it on, as the reference cuDNN's pooling
// is compared with.
//   max: dL/dx[winner of window w] += dL/dy[w] (the winners found again by the forward kernel)
//   avg: dL/dx[i] = Σ over windows w covering i of dL/dy[w] / divisor(w)
// Read next: core/cuda/cudnn_pool.cpp.
#include "core/cpu/cpu_kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/conv.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace kiln::cpu {

namespace {

/// The window geometry over each (image, channel) plane as a one-channel image.
Im2ColGeometry per_plane(const Im2ColGeometry& g) {
  Im2ColGeometry one = g;
  one.channels = 1;
  return one;
}

/// How many elements each window's average divides by, as [1, out_h*out_w].
Tensor divisors(const Tensor& like, const Im2ColGeometry& g, PoolMode mode) {
  const std::int64_t windows = g.out_h * g.out_w;
  Tensor d = ops::empty_output({1, windows}, like.dtype(), like.device(), "avg_pool2d");
  if (mode == PoolMode::AverageCountingPadding) {
    ops::fill_data(d, static_cast<double>(g.kernel_h * g.kernel_w));
    return d;
  }
  Tensor image = ops::empty_output({1, 1, g.height, g.width}, like.dtype(), like.device(), "avg_pool2d");
  ops::fill_data(image, 1.0);
  ops::copy_data(d, ops::sum(ops::unfold(image, per_plane(g), 0.0), {1}, false));
  return d;
}

}  // namespace

void pool2d_forward_kernel(const Tensor& out, const Tensor& input, const Im2ColGeometry& g, PoolMode mode) {
  if (mode == PoolMode::Max) {
    ops::copy_data(out, std::get<0>(ops::max_pool2d_with_indices(input, g)));
    return;
  }
  const std::int64_t planes = input.sizes()[0] * input.sizes()[1];
  const Tensor windows = ops::unfold(ops::view(input, {planes, 1, g.height, g.width}), per_plane(g), 0.0);
  ops::copy_data(ops::view(out, {planes, g.out_h * g.out_w}),
                 ops::binary(BinaryOp::Div, ops::sum(windows, {1}, false), divisors(input, g, mode)));
}

void pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& input,
                            const Tensor& /*output*/, const Im2ColGeometry& g, PoolMode mode) {
  const std::int64_t planes = input.sizes()[0] * input.sizes()[1], windows = g.out_h * g.out_w;
  if (mode == PoolMode::Max) {
    const Tensor winners = std::get<1>(ops::max_pool2d_with_indices(input, g));
    ops::copy_data(grad_input, ops::max_pool2d_with_indices_backward(grad_output, winners, input.sizes()));
    return;
  }
  const std::int64_t taps = g.kernel_h * g.kernel_w;
  const Tensor shares = ops::binary(BinaryOp::Div, ops::view(grad_output, {planes, 1, windows}),
                                    ops::view(divisors(input, g, mode), {1, 1, windows}));
  const Tensor columns = ops::contiguous(ops::expand(shares, {planes, taps, windows}));
  ops::copy_data(grad_input, ops::view(ops::fold(columns, per_plane(g)), input.sizes()));
}

}  // namespace kiln::cpu
