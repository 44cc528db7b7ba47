// autograd/functions/conv.h — convolution, transposed convolution, pooling, unfold and fold
// as differentiable functions, all built on unfold (im2col) and fold (col2im) or on the
// backend's convolution kernels (Note [Convolution as unfold + GEMM] in core/ops/conv.h).
//   Tensor y = kiln::conv2d(x, w, b, /*stride=*/2, /*padding=*/1);   // [N, O, H/2, W/2]
// Read next: autograd/functions/conv.cpp.
#pragma once

#include <cstdint>
#include <optional>

#include "core/expanding_array.h"
#include "core/tensor.h"

namespace kiln {

/// Two sizes (height, width); also built from one integer or a braced list.
using Pair = ExpandingArray<2>;
/// A Pair that may be left unset (std::nullopt).
using OptionalPair = OptionalExpandingArray<2>;

/// 2-D convolution of [N, C, H, W] with weight [O, C/groups, kh, kw].
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              Pair stride = {1, 1}, Pair padding = {0, 0}, Pair dilation = {1, 1},
              std::int64_t groups = 1);
/// conv2d through the backend's convolution kernels whatever the device (cuDNN on CUDA, where
/// conv2d uses them too; unfold + GEMM kernels on the CPU), like PyTorch's at::convolution
/// without the transposed case. Its backward is two ops of their own, so it is
/// differentiable to any order.
Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
                   Pair stride = {1, 1}, Pair padding = {0, 0}, Pair dilation = {1, 1},
                   std::int64_t groups = 1);
/// The transpose of conv2d (its gradient with respect to the input, as a layer): input
/// [N, C_in, H, W], weight [C_in, C_out, kh, kw] (PyTorch's layout), output
/// H_out = (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1.
/// A composite of matmul and fold (col2im), so its gradients are theirs. groups = 1 only.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, Pair stride = 1,
                        Pair padding = 0, Pair output_padding = 0, Pair dilation = 1);
/// stride defaults to the kernel size, as in PyTorch.
Tensor max_pool2d(const Tensor& input, Pair kernel_size, OptionalPair stride = std::nullopt,
                  Pair padding = {0, 0}, Pair dilation = {1, 1});
Tensor avg_pool2d(const Tensor& input, Pair kernel_size, OptionalPair stride = std::nullopt,
                  Pair padding = {0, 0}, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& input, Pair output_size);
/// im2col: [N, C, H, W] -> [N, C*kh*kw, L] (PyTorch's F.unfold).
Tensor unfold(const Tensor& input, Pair kernel_size, Pair dilation = {1, 1}, Pair padding = {0, 0},
              Pair stride = {1, 1});
/// col2im: [N, C*kh*kw, L] -> [N, C, H, W], summing overlaps (PyTorch's F.fold).
Tensor fold(const Tensor& input, Pair output_size, Pair kernel_size, Pair dilation = {1, 1},
            Pair padding = {0, 0}, Pair stride = {1, 1});

}  // namespace kiln
