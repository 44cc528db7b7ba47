// nn/linear.cpp — the Linear layer.
#include "nn/linear.h"

#include <cmath>

#include "autograd/functions/linalg.h"
#include "core/creation.h"
#include "nn/init.h"

namespace kiln::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias)
    : Module("Linear"),
      in_features(in),
      out_features(out),
      weight(register_parameter("weight", empty({out, in}))),
      bias(register_parameter("bias", with_bias ? empty({out}) : Tensor())) {
  reset_parameters();
}

void Linear::reset_parameters() {
  // PyTorch's default: kaiming_uniform_(a = sqrt(5)) gives bound sqrt(6 / (1 + 5)) * sqrt(3 / fan_in)
  // = 1 / sqrt(fan_in); the bias uses the same bound.
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& input) { return linear(input, weight, bias); }

std::string Linear::extra_repr() const {
  return detail::str_cat("in_features=", in_features, ", out_features=", out_features,
                         ", bias=", bias.defined() ? "True" : "False");
}

}  // namespace kiln::nn
