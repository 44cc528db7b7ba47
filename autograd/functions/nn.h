// autograd/functions/nn.h — the neural-network primitives as differentiable functions:
// softmax, losses, dropout, embedding and batch_norm (defined in nn.cpp), and, through the
// headers it includes, convolution and pooling (conv.h), native_batch_norm (batch_norm.h)
// and layer_norm (layer_norm.h). nn/ wraps them in modules; nn::functional re-exports them
// under PyTorch's names.
// Read next: autograd/functions/nn.cpp, autograd/functions/conv.h.
#pragma once

#include <optional>

#include "autograd/functions/batch_norm.h"
#include "autograd/functions/conv.h"
#include "autograd/functions/layer_norm.h"
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
/// in evaluation, uses the running statistics. In training on a backend with batch-norm
/// kernels it is native_batch_norm (autograd/functions/batch_norm.h).
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
}  // namespace kiln
