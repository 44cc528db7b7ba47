// optim/clip_grad.cpp — gradient clipping.
#include "optim/clip_grad.h"

#include <cmath>

#include "autograd/functions/elementwise.h"
#include "core/creation.h"
#include "core/grad_mode.h"

namespace kiln::optim {

Tensor clip_grad_norm_(const TensorList& parameters, double max_norm, double norm_type, bool error_if_nonfinite) {
  NoGradGuard no_grad;
  TensorList grads;
  for (const Tensor& p : parameters) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return zeros({});
  // The norm of all gradients as one vector: the norm of the per-tensor norms.
  TensorList norms;
  for (const Tensor& g : grads) norms.push_back(g.norm(norm_type).to(kFloat32));
  const Tensor total = stack(norms).norm(norm_type);
  if (error_if_nonfinite) {
    const double value = total.item<double>();
    KILN_CHECK(std::isfinite(value), "The total norm of order ", norm_type,
               " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error and "
               "scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  }
  // As PyTorch does: the gradients are always multiplied, by a coefficient clamped to 1, so
  // nothing is read on the host (a captured step can replay it; a GPU need not wait).
  const Tensor coefficient = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (Tensor g : grads) g.mul_(coefficient);
  return total;
}

void clip_grad_value_(const TensorList& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    Tensor g = p.grad();
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace kiln::optim
