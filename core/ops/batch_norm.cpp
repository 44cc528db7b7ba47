// core/ops/batch_norm.cpp — validation and allocation around the batch-norm kernels.
#include "core/ops/batch_norm.h"

#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/checks.h"
#include "core/ops/copy.h"

namespace kiln::ops {

namespace {

/// weight, or ones of [C] when it is undefined (the kernels always scale and shift).
Tensor or_filled(const Tensor& t, const Tensor& input, double value) {
  if (t.defined()) return contiguous(t);
  Tensor filled = empty_output({input.sizes()[1]}, batch_norm_stat_dtype(input.dtype()), input.device(), "batch_norm");
  fill_data(filled, value);
  return filled;
}

void check_stat(const char* name, const Tensor& t, const Tensor& input) {
  if (!t.defined()) return;
  KILN_CHECK(t.dim() == 1 && t.sizes()[0] == input.sizes()[1], "batch_norm: expected ", name, " of size [",
             input.sizes()[1], "], got ", t.sizes());
  const DType expected = batch_norm_stat_dtype(input.dtype());
  KILN_CHECK_TYPE(t.dtype() == expected, "batch_norm: expected ", name, " to have dtype ", scalar_type_name(expected),
                  " for a ", scalar_type_name(input.dtype()), " input, but got ", scalar_type_name(t.dtype()));
}

}  // namespace

DType batch_norm_stat_dtype(DType input) {
  return input == DType::Float16 || input == DType::BFloat16 ? DType::Float32 : input;
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_forward(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                      const Tensor& running_mean, const Tensor& running_var,
                                                      double momentum, double eps) {
  common_device({{"input", &input}, {"weight", &weight}, {"bias", &bias}, {"running_mean", &running_mean},
                 {"running_var", &running_var}});
  check_floating("batch_norm", input);
  KILN_CHECK(input.dim() >= 2, "batch_norm expects an input of at least 2 dims [N, C, ...], got ", input.sizes());
  for (auto [name, t] : {std::pair{"weight", &weight}, {"bias", &bias}, {"running_mean", &running_mean},
                         {"running_var", &running_var}}) {
    check_stat(name, *t, input);
  }
  const std::int64_t channels = input.sizes()[1];
  Tensor out = empty_output(input.sizes(), input.dtype(), input.device(), "batch_norm");
  const DType stats = batch_norm_stat_dtype(input.dtype());
  Tensor save_mean = empty_output({channels}, stats, input.device(), "batch_norm");
  Tensor save_invstd = empty_output({channels}, stats, input.device(), "batch_norm");
  if (input.numel() == 0) return {out, save_mean, save_invstd};
  for (const Tensor* t : {&running_mean, &running_var}) {
    KILN_CHECK(!t->defined() || t->is_contiguous(), "batch_norm: running statistics must be contiguous");
  }
  require_kernel(kernels_for(input.device().type()).batch_norm.forward, "batch_norm", input.device())(
      out, save_mean, save_invstd, contiguous(input), or_filled(weight, input, 1.0), or_filled(bias, input, 0.0),
      running_mean, running_var, momentum, eps);
  // The running statistics were written in place: tensors saved from them are now stale.
  for (const Tensor* t : {&running_mean, &running_var}) {
    if (t->defined()) t->impl()->storage()->bump_version();
  }
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_output, const Tensor& input,
                                                       const Tensor& weight, const Tensor& save_mean,
                                                       const Tensor& save_invstd, double eps) {
  const std::int64_t channels = input.sizes()[1];
  Tensor grad_input = empty_output(input.sizes(), input.dtype(), input.device(), "batch_norm_backward");
  const DType stats = batch_norm_stat_dtype(input.dtype());
  Tensor grad_weight = empty_output({channels}, stats, input.device(), "batch_norm_backward");
  Tensor grad_bias = empty_output({channels}, stats, input.device(), "batch_norm_backward");
  if (input.numel() == 0) return {grad_input, grad_weight, grad_bias};
  require_kernel(kernels_for(input.device().type()).batch_norm.backward, "batch_norm_backward", input.device())(
      grad_input, grad_weight, grad_bias, contiguous(grad_output), contiguous(input), or_filled(weight, input, 1.0),
      contiguous(save_mean), contiguous(save_invstd), eps);
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace kiln::ops
