// core/ops/rnn.cpp — the raw fused LSTM step.
#include "core/ops/rnn.h"

#include "core/ops/allocate.h"
#include "core/ops/fused_rows.h"

namespace kiln::ops {

namespace {

/// Every tensor the kernels touch: one device and dtype, contiguous, [B, 4H] or [B, H].
void check_step(const Tensor& wide, std::initializer_list<const Tensor*> wides, const Tensor& narrow,
                std::initializer_list<const Tensor*> narrows) {
  KILN_CHECK(wide.dim() == 2 && narrow.dim() == 2 && wide.sizes()[0] == narrow.sizes()[0] &&
                 wide.sizes()[1] == 4 * narrow.sizes()[1],
             "lstm_cell: expected gates [B, 4H] and states [B, H], got ", wide.sizes(), " and ", narrow.sizes());
  auto check = [&](const Tensor* t, const Tensor& like) {
    if (!t->defined()) return;
    KILN_CHECK(t->sizes() == like.sizes() && t->dtype() == like.dtype() && t->device() == like.device() &&
                   t->is_contiguous(),
               "lstm_cell: expected a contiguous ", scalar_type_name(like.dtype()), " tensor of size ", like.sizes(),
               " on ", like.device(), ", got ", scalar_type_name(t->dtype()), " ", t->sizes(), " on ", t->device());
  };
  KILN_CHECK(wide.is_contiguous() && narrow.is_contiguous() && wide.dtype() == narrow.dtype() &&
                 wide.device() == narrow.device(),
             "lstm_cell: expected contiguous gates and states of one dtype and device, got ",
             scalar_type_name(wide.dtype()), " on ", wide.device(), " and ", scalar_type_name(narrow.dtype()), " on ",
             narrow.device());
  for (const Tensor* t : wides) check(t, wide);
  for (const Tensor* t : narrows) check(t, narrow);
}

const LstmCellKernels& kernels_of(const Tensor& t) { return fused_kernels_of(t, &BackendKernels::lstm_cell); }

}  // namespace

bool can_fuse_lstm(const Tensor& projected) { return has_fused_kernel(projected, &BackendKernels::lstm_cell); }

void lstm_cell_forward(const Tensor& gates, const Tensor& c, const Tensor& h, const Tensor& recurrent,
                       const Tensor& projected, const Tensor& c_prev) {
  check_step(gates, {&recurrent, &projected}, c, {&h, &c_prev});
  const auto forward = require_kernel(kernels_of(gates).forward, "lstm_cell", gates.device());
  forward(gates, c, h, recurrent, projected, c_prev);
  for (const Tensor* t : {&gates, &c, &h}) t->impl()->storage()->bump_version();
}

void lstm_cell_backward(const Tensor& grad_gates, const Tensor& grad_c, const Tensor& grad_h,
                        const Tensor& grad_output, const Tensor& gates, const Tensor& c, const Tensor& c_prev) {
  check_step(grad_gates, {&gates}, grad_c, {&grad_h, &grad_output, &c, &c_prev});
  const auto backward = require_kernel(kernels_of(grad_gates).backward, "lstm_cell_backward", grad_gates.device());
  backward(grad_gates, grad_c, grad_h, grad_output, gates, c, c_prev);
  for (const Tensor* t : {&grad_gates, &grad_c}) t->impl()->storage()->bump_version();
}

}  // namespace kiln::ops
