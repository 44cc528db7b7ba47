// autograd/functions/layer_norm.h — layer normalisation over the trailing dims as a
// differentiable op (NativeLayerNormBackward0).
// Read next: autograd/functions/layer_norm.cpp.
#pragma once

#include "core/tensor.h"

namespace kiln {

/// Normalises over the last dims given by `normalized_shape`.
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

}  // namespace kiln
