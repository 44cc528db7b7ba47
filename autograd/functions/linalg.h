// autograd/functions/linalg.h — differentiable matrix products as free functions.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace kiln {

/// PyTorch's matmul: dot product for two vectors, mm for matrices, and batched products
/// with broadcast batch dims otherwise (a 1-D operand gets a dim added and removed).
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
/// beta * self + alpha * (mat1 @ mat2)
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
/// input @ weight^T + bias, with weight [out_features, in_features] (nn.Linear's layout).
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});

}  // namespace kiln
