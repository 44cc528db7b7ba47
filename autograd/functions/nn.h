// autograd/functions/nn.h — the neural-network primitives as differentiable functions:
// activations, losses, dropout, embedding, normalisation, convolution and pooling. nn/
// wraps them in modules; nn::functional re-exports them under PyTorch's names.
// Read next: autograd/functions/nn.cpp, autograd/functions/conv.cpp.
#pragma once

#include <array>
#include <optional>
#include <tuple>

#include "core/expanding_array.h"
#include "core/tensor.h"

namespace kiln {

enum class Reduction { None, Mean, Sum };

Tensor softmax(const Tensor& x, std::int64_t dim);
Tensor log_softmax(const Tensor& x, std::int64_t dim);
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);

/// Cross-entropy of logits `input` [N, C] (or [C], or [N, C, d1, ...]) against class indices
/// (Int64 [N]) or class probabilities (same shape as input). label_smoothing mixes the target
/// with the uniform distribution, as PyTorch does.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     std::int64_t ignore_index = -100, Reduction reduction = Reduction::Mean,
                     double label_smoothing = 0.0);
/// Negative log-likelihood of log-probabilities `input` at class indices `target`.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                std::int64_t ignore_index = -100, Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
/// Sigmoid + binary cross-entropy in one numerically stable expression.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        Reduction reduction = Reduction::Mean);

/// Zeroes each element with probability p and scales the rest by 1/(1-p) (when training).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/// Rows of `weight` [num_embeddings, dim] at `indices`; the padding row gets no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices,
                 std::optional<std::int64_t> padding_idx = std::nullopt);

/// Batch normalisation over all dims but 1. In training, normalises with the batch's
/// statistics and updates running_mean/running_var in place (when given) with `momentum`;
/// in evaluation, uses the running statistics.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
/// PyTorch's native_batch_norm: batch normalisation as one op through the backend's
/// batch-norm kernels (cuDNN on CUDA, where batch_norm in training uses them too). Returns
/// (output, save_mean, save_invstd), the last two the batch mean and 1/sqrt(var + eps), not
/// differentiable. In evaluation it is batch_norm, and the two statistics are empty.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum = 0.1, double eps = 1e-5);
/// Normalises over the last dims given by `normalized_shape`.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

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
