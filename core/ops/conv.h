// core/ops/conv.h — raw im2col (unfold) and col2im (fold): the data movement behind
// convolution and pooling. See Note [Convolution as unfold + GEMM].
// Read next: autograd/functions/conv.cpp (conv2d and the pools built on these).
#pragma once

#include <array>
#include <tuple>

#include "core/kernels.h"
#include "core/tensor.h"

namespace kiln::ops {

// Note [Convolution as unfold + GEMM]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// unfold copies every kh x kw window of an [N, C, H, W] batch into a column:
// cols[n, (c*kh + i)*kw + j, oy*ow + ox] = x[n, c, oy*sh - ph + i*dh, ox*sw - pw + j*dw].
// A convolution is then one matrix product per image, weight[O, C*kh*kw] @ cols[n], and
// max/avg pooling are a max/mean over the column dim of a per-channel unfold. fold is
// unfold's adjoint (it sums overlapping windows back), so each is the other's gradient,
// and conv2d, max_pool2d and avg_pool2d get their backward - and double backward - from
// unfold, fold, matmul, max and mean without a hand-written backward kernel.
// That is conv2d on the CPU. On CUDA, conv2d calls cuDNN instead (the op-kernel route,
// core/backends.h), through `convolution`: one op per direction, whose backward ops are each
// other's derivatives (autograd/functions/conv.cpp). The CPU implements the same kernels with
// unfold + GEMM, so that route is gradchecked without a GPU.

/// The im2col geometry, validated, for an [N, C, H, W] input.
Im2ColGeometry im2col_geometry(IntArrayRef input_sizes, std::array<std::int64_t, 2> kernel,
                               std::array<std::int64_t, 2> dilation,
                               std::array<std::int64_t, 2> padding,
                               std::array<std::int64_t, 2> stride);

/// [N, C, H, W] -> [N, C*kh*kw, out_h*out_w]; padding reads `pad_value`.
Tensor unfold(const Tensor& x, const Im2ColGeometry& g, double pad_value = 0.0);
/// [N, C*kh*kw, L] -> [N, C, H, W], summing overlapping windows.
Tensor fold(const Tensor& cols, const Im2ColGeometry& g);

/// The same windows with the batch folded into the columns: [C*kh*kw, N*L]. conv2d multiplies
/// this by the weight [O, C*kh*kw] in one large GEMM instead of N small ones (Note
/// [Convolution as unfold + GEMM]).
Tensor unfold_columns(const Tensor& x, const Im2ColGeometry& g);
/// The adjoint of unfold_columns: [C*kh*kw, N*L] -> [N, C, H, W].
Tensor fold_columns(const Tensor& cols, const Im2ColGeometry& g, std::int64_t batch);

/// Checks that `bias`, when defined, is [O] for a weight [O, ...] (PyTorch's message).
void check_convolution_bias(const Tensor& weight, const Tensor& bias);
/// The backend's convolution kernel of input [N, C, H, W] with weight [O, C/groups, kh, kw],
/// plus bias [O] when it is defined.
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                   std::int64_t groups);
/// Its adjoint in the input: the gradient of `input` (of `input_sizes`) given the output's.
Tensor convolution_backward_input(const Tensor& grad_output, const Tensor& weight, IntArrayRef input_sizes,
                                  const Im2ColGeometry& g, std::int64_t groups);
/// Its adjoint in the weight: the gradient of the weight (of `weight_sizes`).
Tensor convolution_backward_weight(const Tensor& grad_output, const Tensor& input, IntArrayRef weight_sizes,
                                   const Im2ColGeometry& g, std::int64_t groups);

/// 2-D pooling through the backend's pool kernels: [N, C, H, W] -> [N, C, out_h, out_w].
Tensor pool2d(const Tensor& x, const Im2ColGeometry& g, PoolMode mode);
/// Its backward: the gradient of x, from the output's gradient, x and the forward's output.
Tensor pool2d_backward(const Tensor& grad_output, const Tensor& x, const Tensor& output, const Im2ColGeometry& g,
                       PoolMode mode);

/// 2-D max pooling: (values [N, C, oh, ow], indices into each H*W input plane as Int64).
/// Padding never wins (it reads -inf); ties keep the first element of the window.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Im2ColGeometry& g);
/// Its backward (PyTorch's max_pool2d_with_indices_backward): a gradient of `input_sizes`,
/// zero except where an element won windows, which gets the sum of their grad_output.
Tensor max_pool2d_with_indices_backward(const Tensor& grad_output, const Tensor& indices, IntArrayRef input_sizes);

}  // namespace kiln::ops
