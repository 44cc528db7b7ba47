// core/cpu/conv.cpp — the CPU's convolution kernels: the library-convolution interface
// (ConvKernels in core/kernels.h) implemented with unfold + GEMM, as PyTorch's CPU
// slow_conv2d is. conv2d on the CPU calls unfold and mm directly (its graph is then the
// composite one, Note [Convolution as unfold + GEMM]); these kernels give `convolution`, the
// op that always takes the library path, a reference to be gradchecked against here and to be
// compared with cuDNN on a GPU.
// Read next: core/cuda/cudnn_conv.cpp.
#include "core/cpu/channel_blocks.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/pool_record.h"
#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/conv.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/linalg.h"
#include "core/ops/view.h"

namespace kiln::cpu {

namespace {

/// A gradient [N, O, oh, ow] as the rows of the column product: [O, N*oh*ow].
Tensor output_rows(const Tensor& grad_output) {
  const std::int64_t n = grad_output.sizes()[0], o = grad_output.sizes()[1];
  return ops::view(ops::contiguous(ops::transpose(ops::view(grad_output, {n, o, -1}), 0, 1)), {o, -1});
}

/// out (a [groups * rows_a, cols] matrix) = per group, a_g @ b_g, where a_g and b_g are the
/// group's row blocks of `a` and `b`, each transposed first when asked.
void grouped_mm(const Tensor& out, const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                std::int64_t groups) {
  const std::int64_t a_rows = a.sizes()[0] / groups, b_rows = b.sizes()[0] / groups,
                     out_rows = out.sizes()[0] / groups;
  for (std::int64_t i = 0; i < groups; ++i) {
    Tensor ai = ops::narrow(a, 0, i * a_rows, a_rows), bi = ops::narrow(b, 0, i * b_rows, b_rows);
    if (transpose_a) ai = ops::transpose(ai, 0, 1);
    if (transpose_b) bi = ops::transpose(bi, 0, 1);
    ops::copy_data(ops::narrow(out, 0, i * out_rows, out_rows), ops::mm(ai, bi));
  }
}

}  // namespace

// out[n, o] = bias[o] + sum over the group's (c, i, j) of weight[o, c, i, j] * window(n, c, i, j)
void conv2d_forward_kernel(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Im2ColGeometry& g, std::int64_t groups) {
  const std::int64_t n = input.sizes()[0], o = weight.sizes()[0];
  const Tensor product = ops::empty_output({o, n * g.out_h * g.out_w}, out.dtype(), out.device(), "convolution");
  grouped_mm(product, ops::view(weight, {o, -1}), false, ops::unfold_columns(input, g), false, groups);
  const Tensor images = ops::permute(ops::view(product, {o, n, g.out_h, g.out_w}), {1, 0, 2, 3});
  ops::copy_data(out, bias.defined() ? ops::binary(BinaryOp::Add, images, ops::view(bias, {1, o, 1, 1})) : images);
}

// The forward, then relu over its output in place: the reference for oneDNN's post-op route
// (core/onednn/conv.cpp), which fuses the two.
void conv2d_forward_relu_kernel(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                                const Im2ColGeometry& g, std::int64_t groups) {
  conv2d_forward_kernel(out, input, weight, bias, g, groups);
  const UnaryKernel relu = registered_kernels(DeviceType::CPU).unary[static_cast<std::size_t>(UnaryOp::Relu)];
  relu(out, out);
}

// The adjoint in the input: columns = weightᵀ @ gradient rows, folded back into images.
void conv2d_backward_input_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                                  const Im2ColGeometry& g, std::int64_t groups) {
  const std::int64_t n = grad_input.sizes()[0], o = weight.sizes()[0];
  const Tensor cols = ops::empty_output({weight.numel() / o * groups, n * g.out_h * g.out_w}, grad_input.dtype(),
                                        grad_input.device(), "convolution_backward");
  grouped_mm(cols, ops::view(weight, {o, -1}), true, output_rows(grad_output), false, groups);
  ops::copy_data(grad_input, ops::fold_columns(cols, g, n));
}

// The adjoint in the weight: gradient rows @ columnsᵀ, group by group.
void conv2d_backward_weight_kernel(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                                   const Im2ColGeometry& g, std::int64_t groups) {
  const std::int64_t o = grad_weight.sizes()[0];
  grouped_mm(ops::view(grad_weight, {o, -1}), output_rows(grad_output), false, ops::unfold_columns(input, g), true,
             groups);
}

// Both gradients as the two kernels make them: the reference for oneDNN's diff_bias, and
// exactly what the unfused pair computes (the bias by Kiln's own sum over N, H and W).
void conv2d_backward_weight_bias_kernel(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                        const Tensor& input, const Im2ColGeometry& g, std::int64_t groups) {
  conv2d_backward_weight_kernel(grad_weight, grad_output, input, g, groups);
  const ReduceKernel sum = registered_kernels(DeviceType::CPU).reduce[static_cast<std::size_t>(ReduceOp::Sum)];
  sum(grad_bias, grad_output, {0, 2, 3}, 1.0);
}

namespace {

/// The unfused compositions take activations in NCHW only: one held in channel blocks (Note
/// [Channel blocks across a layer boundary]) is for the fused kernels a pass checked it for.
void expect_plain(std::initializer_list<const Tensor*> activations) {
  for (const Tensor* t : activations) {
    KILN_CHECK(!holds_channel_blocks(*t), "conv2d: an activation in channel blocks ", t->sizes(),
               " reached a kernel that reads NCHW only");
  }
}

}  // namespace

// The two kernels the table has, with the convolution's output in a temporary: the reference
// for the thin route's pooled forward (core/cpu/conv_thin.cpp).
void conv2d_forward_relu_max_pool_kernel(const Tensor& values, const Tensor& indices, const Tensor& input,
                                         const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                         const Im2ColGeometry& pool, std::int64_t groups) {
  expect_plain({&values, &input});
  const BackendKernels& kernels = registered_kernels(DeviceType::CPU);
  const Tensor out = ops::empty_output({input.sizes()[0], weight.sizes()[0], g.out_h, g.out_w}, input.dtype(),
                                       input.device(), "convolution");
  kernels.conv2d.forward_relu(out, input, weight, bias, g, groups);
  if (!holds_pool_records(indices)) return kernels.max_pool2d(values, indices, out, pool);
  const Tensor positions = ops::empty_output(indices.sizes(), kInt64, indices.device(), "max_pool2d");
  kernels.max_pool2d(values, positions, out, pool);
  pool_records_from_indices(indices, positions, values, g.out_w);
}

// The two kernels the table has, with the unpooled gradient in a temporary: the reference for
// the thin route's weight gradient read through its pool (core/cpu/conv_thin.cpp).
void conv2d_backward_weight_bias_through_max_pool_kernel(const Tensor& grad_weight, const Tensor& grad_bias,
                                                         const Tensor& grad_pooled, const Tensor& indices,
                                                         const Tensor& values, const Tensor& input,
                                                         const Im2ColGeometry& g, std::int64_t groups) {
  expect_plain({&grad_pooled, &values});
  const BackendKernels& kernels = registered_kernels(DeviceType::CPU);
  const Tensor grad_output = ops::empty_output({input.sizes()[0], grad_weight.sizes()[0], g.out_h, g.out_w},
                                               input.dtype(), input.device(), "max_pool2d_backward");
  kernels.max_pool2d_backward_relu(grad_output, grad_pooled, indices, values);
  kernels.conv2d.backward_weight_bias(grad_weight, grad_bias, grad_output, input, g, groups);
}

// The three kernels the table has, with the unpooled gradient in a temporary: the reference
// for oneDNN's route, which unpools into the primitives' blocked layout (core/onednn/conv.cpp).
void conv2d_backward_through_max_pool_kernel(const Tensor& grad_input, const Tensor& grad_weight,
                                             const Tensor& grad_bias, const Tensor& grad_pooled, const Tensor& indices,
                                             const Tensor& values, const Tensor& weight, const Tensor& input,
                                             const Im2ColGeometry& g, std::int64_t groups) {
  expect_plain({&grad_input, &grad_pooled, &values, &input});
  const BackendKernels& kernels = registered_kernels(DeviceType::CPU);
  const Tensor grad_output = ops::empty_output({input.sizes()[0], grad_weight.sizes()[0], g.out_h, g.out_w},
                                               input.dtype(), input.device(), "max_pool2d_backward");
  kernels.max_pool2d_backward_relu(grad_output, grad_pooled, indices, values);
  kernels.conv2d.backward_input(grad_input, grad_output, weight, g, groups);
  kernels.conv2d.backward_weight_bias(grad_weight, grad_bias, grad_output, input, g, groups);
}

}  // namespace kiln::cpu
