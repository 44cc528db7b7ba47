// core/ops/layer_norm.h — raw layer normalisation over the trailing `normalized` elements of
// each row, and its backward (PyTorch's native_layer_norm and native_layer_norm_backward), on
// the device's fused kernel (Note [One pass per layer-norm row] in core/cpu/layer_norm.cpp).
// The differentiable op, and the composite used where no kernel exists, are in
// autograd/functions/layer_norm.cpp.
#pragma once

#include <array>
#include <tuple>

#include "core/tensor.h"

namespace kiln::ops {

/// True when the device has a fused layer norm for these arguments: Float32 or Float64, and a
/// weight and bias (when defined) of the input's dtype and device with `normalized` elements.
bool can_fuse_layer_norm(const Tensor& input, std::int64_t normalized, const Tensor& weight, const Tensor& bias);

/// (output, mean, rstd): mean and rstd hold one value per row ([input.numel() / normalized]).
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, std::int64_t normalized,
                                                     const Tensor& weight, const Tensor& bias, double eps);

/// (grad_input, grad_weight, grad_bias); each is computed only when its `need` is set (and,
/// for the weight's and bias's, when they are defined).
std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_output, const Tensor& input,
                                                              const Tensor& mean, const Tensor& rstd,
                                                              const Tensor& weight, const Tensor& bias,
                                                              std::array<bool, 3> need);

}  // namespace kiln::ops
