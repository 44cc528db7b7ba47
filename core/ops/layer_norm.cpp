// core/ops/layer_norm.cpp — the raw fused layer norm: checks, then the device's kernel.
#include "core/ops/layer_norm.h"

#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/fused_rows.h"

namespace kiln::ops {

namespace {

const LayerNormKernels& kernels_of(const Tensor& t) { return fused_kernels_of(t, &BackendKernels::layer_norm); }

bool is_parameter_of(const Tensor& p, const Tensor& input, std::int64_t normalized) {
  return !p.defined() || (p.dtype() == input.dtype() && p.device() == input.device() && p.numel() == normalized);
}

}  // namespace

bool can_fuse_layer_norm(const Tensor& input, std::int64_t normalized, const Tensor& weight, const Tensor& bias) {
  return has_fused_kernel(input, &BackendKernels::layer_norm) && is_parameter_of(weight, input, normalized) &&
         is_parameter_of(bias, input, normalized);
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, std::int64_t normalized,
                                                     const Tensor& weight, const Tensor& bias, double eps) {
  KILN_CHECK(normalized > 0 ? input.numel() % normalized == 0 : input.numel() == 0,
             "native_layer_norm: ", input.sizes(), " does not split into rows of ", normalized);
  const auto forward = require_kernel(kernels_of(input).forward, "native_layer_norm", input.device());
  const std::int64_t rows = normalized > 0 ? input.numel() / normalized : 0;
  const Tensor x = ops::contiguous(input);
  Tensor out = empty_output(input.sizes(), input.dtype(), input.device(), "native_layer_norm");
  Tensor mean = empty_output({rows}, input.dtype(), input.device(), "native_layer_norm");
  Tensor rstd = empty_output({rows}, input.dtype(), input.device(), "native_layer_norm");
  forward(out, mean, rstd, x, weight.defined() ? ops::contiguous(weight) : weight,
          bias.defined() ? ops::contiguous(bias) : bias, eps);
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_output, const Tensor& input,
                                                              const Tensor& mean, const Tensor& rstd,
                                                              const Tensor& weight, const Tensor& bias,
                                                              std::array<bool, 3> need) {
  KILN_CHECK(grad_output.sizes() == input.sizes() && grad_output.dtype() == input.dtype(),
             "native_layer_norm_backward: expected grad_output like the input (", scalar_type_name(input.dtype()), " ",
             input.sizes(), "), got ", scalar_type_name(grad_output.dtype()), " ", grad_output.sizes());
  const auto backward = require_kernel(kernels_of(input).backward, "native_layer_norm_backward", input.device());
  const char* op = "native_layer_norm_backward";
  Tensor grad_input, grad_weight, grad_bias;
  if (need[0]) grad_input = empty_output(input.sizes(), input.dtype(), input.device(), op);
  if (need[1] && weight.defined()) grad_weight = empty_output(weight.sizes(), weight.dtype(), weight.device(), op);
  if (need[2] && bias.defined()) grad_bias = empty_output(bias.sizes(), bias.dtype(), bias.device(), op);
  if ((grad_input.defined() || grad_weight.defined() || grad_bias.defined())) {
    backward(grad_input, grad_weight, grad_bias, ops::contiguous(grad_output), ops::contiguous(input), mean, rstd,
             weight.defined() ? ops::contiguous(weight) : weight);
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace kiln::ops
