// core/ops/batch_norm.h — raw training-mode batch normalisation through the backend's
// batch-norm kernels (cuDNN on CUDA). batch_norm itself is a composite of reductions and
// elementwise ops on the CPU; these are the one-kernel-per-pass route it takes where a backend
// offers one (BatchNormKernels in core/kernels.h).
// Read next: autograd/functions/nn.cpp (NativeBatchNormBackward0).
#pragma once

#include <tuple>

#include "core/tensor.h"

namespace kiln::ops {

/// The dtype of weight, bias and the statistics: input's, or Float32 for half inputs.
DType batch_norm_stat_dtype(DType input);


/// (output, save_mean, save_invstd) for input [N, C, *]; weight and bias may be undefined
/// (1 and 0); running stats, when defined, are updated in place.
std::tuple<Tensor, Tensor, Tensor> batch_norm_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                      const Tensor& running_mean, const Tensor& running_var,
                                                      double momentum, double eps);

/// (grad_input, grad_weight, grad_bias) from the statistics batch_norm_forward saved.
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_output, const Tensor& input,
                                                       const Tensor& weight, const Tensor& save_mean,
                                                       const Tensor& save_invstd, double eps);

}  // namespace kiln::ops
