// optim/clip_grad.h — gradient clipping, PyTorch's torch.nn.utils.clip_grad_norm_ and
// clip_grad_value_. Call after backward() (and after GradScaler::unscale_ under AMP).
#pragma once

#include "core/tensor.h"

namespace kiln::optim {

/// Scales all gradients by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the
/// norm of all gradients together; returns total_norm. A non-finite norm is an error when
/// `error_if_nonfinite`.
Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
/// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const TensorList& parameters, double clip_value);

}  // namespace kiln::optim
