// autograd/functions/rnn.h — an LSTM layer in one direction over a whole sequence as one
// differentiable op: nn::LSTM's recurrence (Note [The fused LSTM layer] in rnn.cpp).
//
//   // projected = x W_ihᵀ + b_ih + b_hh for the whole sequence, [T, B, 4H]
//   TensorList out = kiln::lstm_layer(projected, h0, c0, weight_hh, /*reverse=*/false);
//   // out[0] [T, B, H] the hidden state of every step, out[1] h_n, out[2] c_n [B, H]
//
// Read next: nn/rnn.h.
#pragma once

#include <utility>

#include "core/tensor.h"

namespace kiln {

/// Runs the LSTM recurrence from (h0, c0) [B, H] over `projected` [T, B, 4H] (the input
/// projections of every step with both biases; gates i, f, g, o) with the recurrent weight
/// `weight_hh` [4H, H]: from the first step to the last, or the last to the first with
/// `reverse`. Returns {output [T, B, H], h_n [B, H], c_n [B, H]}. Where the device has the
/// fused step (Float32 and Float64 on the CPU) it runs as one op whose backward goes through
/// time itself; elsewhere as differentiable ops per step.
TensorList lstm_layer(const Tensor& projected, const Tensor& h0, const Tensor& c0, const Tensor& weight_hh,
                      bool reverse = false);

/// One LSTM step with differentiable ops from the pre-activation gates [B, 4H] (i, f, g, o)
/// and the cell state c [B, H]: {h', c'}. LSTMCell and the unfused layer are built on it.
std::pair<Tensor, Tensor> lstm_cell_from_gates(const Tensor& gates, const Tensor& c);

}  // namespace kiln
