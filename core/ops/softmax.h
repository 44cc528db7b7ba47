// core/ops/softmax.h — the raw softmax and log-softmax along one dim, and their backward
// (PyTorch's _softmax, _log_softmax and their _backward_data), on the device's fused kernel
// (Note [One pass per softmax row] in core/cpu/softmax.cpp). The differentiable op and the
// composite used where no kernel exists are in autograd/functions/softmax.cpp.
#pragma once

#include "core/tensor.h"

namespace kiln::ops {

/// True when `x`'s device (or the device a planned meta tensor stands for) has a fused softmax
/// for its dtype (Float32 or Float64).
bool can_fuse_softmax(const Tensor& x);
/// softmax(x) (or log_softmax(x) with `log`) along `dim` (wrapped), as a new contiguous tensor.
Tensor softmax(const Tensor& x, std::int64_t dim, bool log);
/// The gradient of the input from the output's gradient and the forward's output `y`.
Tensor softmax_backward(const Tensor& grad_output, const Tensor& y, std::int64_t dim, bool log);

}  // namespace kiln::ops
