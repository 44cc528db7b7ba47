// core/ops/optim.cpp — raw fused optimizer updates.
#include "core/ops/optim.h"

#include "core/ops/allocate.h"
#include "core/ops/checks.h"
#include "core/ops/copy.h"

namespace kiln::ops {

namespace {

/// Every defined tensor of `others` (the optional ones may be undefined; callers check the
/// required ones) is like the contiguous `p`: its device, dtype and shape.
bool all_like(const Tensor& p, std::initializer_list<const Tensor*> others) {
  for (const Tensor* t : others) {
    if (!t->defined()) continue;
    if (t->device() != p.device() || t->dtype() != p.dtype() || t->sizes() != p.sizes() || !t->is_contiguous()) {
      return false;
    }
  }
  return p.is_contiguous();
}

}  // namespace

bool can_fuse_adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v) {
  return g.defined() && m.defined() && v.defined() && all_like(p, {&g, &m, &v}) &&
         kernels_for(p.device().type()).adam != nullptr;
}

bool can_fuse_sgd(const Tensor& p, const Tensor& g, const Tensor& buf) {
  return g.defined() && all_like(p, {&g, &buf}) && kernels_for(p.device().type()).sgd != nullptr;
}

void sgd_step_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& step) {
  KILN_CHECK(can_fuse_sgd(param, grad, momentum_buffer),
             "sgd_step_: param, grad and momentum buffer must be contiguous with one device, dtype and shape");
  kernels_for(param.device().type()).sgd(param, grad, momentum_buffer, step);
  for (const Tensor* t : {&param, &momentum_buffer}) {
    if (t->defined()) t->impl()->storage()->bump_version();
  }
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

void unscale_and_check_(const TensorList& grads, double inv_scale, const Tensor& found_inf) {
  KILN_CHECK(found_inf.numel() == 1 && found_inf.dtype() == kFloat32, "unscale: found_inf must be a one-element ",
             "Float32 tensor, got ", found_inf.sizes(), " ", scalar_type_name(found_inf.dtype()));
  for (const Tensor& g : grads) {
    if (!g.defined()) continue;
    KILN_CHECK(is_floating_point(g.dtype()), "unscale: gradients must be floating point, got ",
               scalar_type_name(g.dtype()));
    (void)common_device({{"found_inf", &found_inf}, {"grad", &g}});
    const UnscaleKernel kernel = require_kernel(kernels_for(g.device().type()).unscale, "unscale", g.device());
    if (g.is_contiguous()) {
      kernel(g, inv_scale, found_inf);
    } else {
      Tensor dense = contiguous(g);
      kernel(dense, inv_scale, found_inf);
      copy_data(g, dense, false);
    }
    g.impl()->storage()->bump_version();
  }
  found_inf.impl()->storage()->bump_version();
}

}  // namespace kiln::ops
