// autograd/functions/batch_norm.h — native_batch_norm, batch normalisation as one
// differentiable op through the backend's batch-norm kernels. batch_norm itself, which
// hands over to it, is declared in autograd/functions/nn.h.
// Read next: autograd/functions/batch_norm.cpp.
#pragma once

#include <tuple>

#include "core/tensor.h"

namespace kiln {

/// PyTorch's native_batch_norm: batch normalisation as one op through the backend's
/// batch-norm kernels (cuDNN on CUDA, where batch_norm in training uses them too). Returns
/// (output, save_mean, save_invstd), the last two the batch mean and 1/sqrt(var + eps), not
/// differentiable. In evaluation it is batch_norm, and the two statistics are empty.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum = 0.1, double eps = 1e-5);

}  // namespace kiln
