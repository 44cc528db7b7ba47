// nn/normalization.cpp — batch and layer normalisation modules.
#include "nn/normalization.h"

#include "autograd/functions/nn.h"
#include "core/creation.h"
#include "core/grad_mode.h"

namespace kiln::nn {

BatchNorm::BatchNorm(const char* type_name, std::int64_t n, BatchNormOptions o)
    : Module(type_name),
      num_features(n),
      options(o),
      weight(register_parameter("weight", o.affine ? ones({n}) : Tensor())),
      bias(register_parameter("bias", o.affine ? zeros({n}) : Tensor())),
      running_mean(register_buffer("running_mean", o.track_running_stats ? zeros({n}) : Tensor())),
      running_var(register_buffer("running_var", o.track_running_stats ? ones({n}) : Tensor())),
      num_batches_tracked(register_buffer("num_batches_tracked",
                                          o.track_running_stats ? zeros({}, kInt64) : Tensor())) {}

void BatchNorm::reset_running_stats() {
  if (!options.track_running_stats) return;
  NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

Tensor BatchNorm::forward(const Tensor& input) {
  check_input(input);
  KILN_CHECK(input.sizes()[1] == num_features, type_name(), ": expected ", num_features,
             " channels (dim 1), but got input of size ", input.sizes());
  double momentum = options.momentum.value_or(0.0);
  if (is_training() && options.track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    // Without a momentum the running stats are a cumulative average: weight 1/n for batch n.
    if (!options.momentum) momentum = 1.0 / static_cast<double>(num_batches_tracked.item<std::int64_t>());
  }
  // Batch statistics in training, and always when no running statistics are kept (the
  // running tensors are then undefined, so nothing is updated).
  const bool use_batch_stats = is_training() || !options.track_running_stats;
  return batch_norm(input, running_mean, running_var, weight, bias, use_batch_stats, momentum, options.eps);
}

std::string BatchNorm::extra_repr() const {
  return detail::str_cat(num_features, ", eps=", options.eps, ", momentum=",
                         options.momentum ? detail::str_cat(*options.momentum) : std::string("None"),
                         ", affine=", options.affine ? "True" : "False", ", track_running_stats=",
                         options.track_running_stats ? "True" : "False");
}

void BatchNorm1d::check_input(const Tensor& input) const {
  KILN_CHECK_VALUE(input.dim() == 2 || input.dim() == 3, "expected 2D or 3D input (got ", input.dim(), "D input)");
}

void BatchNorm2d::check_input(const Tensor& input) const {
  KILN_CHECK_VALUE(input.dim() == 4, "expected 4D input (got ", input.dim(), "D input)");
}

LayerNorm::LayerNorm(Shape shape, double e, bool affine)
    : Module("LayerNorm"),
      normalized_shape(std::move(shape)),
      eps(e),
      weight(register_parameter("weight", affine ? ones(normalized_shape) : Tensor())),
      bias(register_parameter("bias", affine ? zeros(normalized_shape) : Tensor())) {}

Tensor LayerNorm::forward(const Tensor& input) {
  return layer_norm(input, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
  std::string s = "(";
  for (std::size_t i = 0; i < normalized_shape.size(); ++i) s += (i ? ", " : "") + std::to_string(normalized_shape[i]);
  if (normalized_shape.size() == 1) s += ",";
  return detail::str_cat(s, "), eps=", eps, ", elementwise_affine=", weight.defined() ? "True" : "False");
}

}  // namespace kiln::nn
