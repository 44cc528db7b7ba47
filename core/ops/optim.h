// core/ops/optim.h — raw fused optimizer updates (core/cpu/adam.cpp, core/cpu/sgd.cpp) and GradScaler's
// unscale pass (core/cpu/unscale.cpp).
#pragma once

#include "core/kernels.h"
#include "core/tensor.h"

namespace kiln::ops {

/// True when the fused Adam kernel can update these tensors (same device, dtype and shape,
/// all contiguous, a kernel for the device).
bool can_fuse_adam(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq);
/// One Adam/AdamW update in place; bumps the versions of everything it writes.
void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const AdamStep& step);

/// True when the fused SGD kernel can update param with grad (and buffer, when defined): same
/// device, dtype and shape, all contiguous, a kernel for the device.
bool can_fuse_sgd(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer);
/// One SGD update in place; bumps the versions of what it writes.
void sgd_step_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& step);

/// GradScaler's unscale: every grad *= inv_scale in place (one pass each), and found_inf
/// (a one-element Float32 tensor on the grads' device) becomes 1 if any grad held an inf or
/// NaN. Grads must be floating and on found_inf's device.
void unscale_and_check_(const TensorList& grads, double inv_scale, const Tensor& found_inf);

}  // namespace kiln::ops
