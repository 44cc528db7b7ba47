// core/ops/rnn.h — the raw fused LSTM step (core/cpu/lstm_cell.cpp, core/cuda/rnn.cu): checks,
// then the device's kernel. The differentiable layer built on it is in
// autograd/functions/rnn.cpp.
#pragma once

#include "core/tensor.h"

namespace kiln::ops {

/// True when the device the tensor is on (or that the meta device stands for in a plan) has a
/// fused LSTM step for its dtype (Float32 or Float64).
bool can_fuse_lstm(const Tensor& projected);
/// One step forward; see LstmCellKernels in core/kernels.h for the arguments.
void lstm_cell_forward(const Tensor& gates, const Tensor& c, const Tensor& h, const Tensor& recurrent,
                       const Tensor& projected, const Tensor& c_prev);
/// One step backward; grad_c is read and overwritten with the previous step's cell gradient.
void lstm_cell_backward(const Tensor& grad_gates, const Tensor& grad_c, const Tensor& grad_h,
                        const Tensor& grad_output, const Tensor& gates, const Tensor& c, const Tensor& c_prev);

}  // namespace kiln::ops
