// core/ops/optim.cpp — raw fused optimizer updates.
#include "core/ops/optim.h"

#include "core/ops/allocate.h"

namespace kiln::ops {

bool can_fuse_adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v) {
  for (const Tensor* t : {&g, &m, &v}) {
    if (t->device() != p.device() || t->dtype() != p.dtype() || t->sizes() != p.sizes() || !t->is_contiguous()) {
      return false;
    }
  }
  return p.is_contiguous() && has_data(p.device()) && kernels_for(p.device().type()).adam != nullptr;
}

void adam_step_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                const Tensor& max_exp_avg_sq, const AdamStep& step) {
  KILN_CHECK(can_fuse_adam(param, grad, exp_avg, exp_avg_sq),
             "adam_step_: param, grad and state must be contiguous with one device, dtype and shape");
  KILN_CHECK(!step.amsgrad || (max_exp_avg_sq.defined() && max_exp_avg_sq.sizes() == param.sizes()),
             "adam_step_: amsgrad needs max_exp_avg_sq");
  kernels_for(param.device().type()).adam(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step);
  for (const Tensor* t : {&param, &exp_avg, &exp_avg_sq, &max_exp_avg_sq}) {
    if (t->defined()) t->impl()->storage()->bump_version();
  }
}

}  // namespace kiln::ops
