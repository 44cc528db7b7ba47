// autograd/functions/float_math.h — composites that chain several steps (log_softmax's
// x - logsumexp(x), normalisation's (x - mean) / std) lose too much when every intermediate
// is rounded to Float16/BFloat16: log_softmax of [1, 4] in bfloat16 cancels to the 1/32
// quantum of logsumexp. Like PyTorch's CPU kernels, they compute in Float32 and round once.
// The casts are differentiable, so gradients come back in the input's dtype.
#pragma once

#include "core/tensor.h"

namespace kiln {

template <class Fn>
Tensor in_float_math(const Tensor& x, const Fn& fn) {
  if (!is_reduced_floating_point(x.dtype())) return fn(x);
  return fn(x.to(kFloat32)).to(x.dtype());
}

}  // namespace kiln
