// nn/init.cpp — PyTorch's initialisation formulas (see nn/init.h).
#include "nn/init.h"

#include <cmath>

#include "core/grad_mode.h"

namespace kiln::nn::init {

double calculate_gain(const std::string& nonlinearity, double param) {
  if (nonlinearity == "linear" || nonlinearity == "conv1d" || nonlinearity == "conv2d" ||
      nonlinearity == "conv3d" || nonlinearity == "sigmoid") {
    return 1.0;
  }
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nonlinearity == "selu") return 3.0 / 4.0;
  detail::throw_error<ValueError>(std::source_location::current(), "Unsupported nonlinearity ", nonlinearity);
}

std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  KILN_CHECK_VALUE(t.dim() >= 2, "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions");
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= t.sizes()[d];
  return {t.sizes()[1] * receptive, t.sizes()[0] * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b) {
  NoGradGuard no_grad;
  t.uniform_(a, b);
  return t;
}

Tensor& normal_(Tensor& t, double mean, double std) {
  NoGradGuard no_grad;
  t.normal_(mean, std);
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor& ones_(Tensor& t) { return constant_(t, 1.0); }
Tensor& zeros_(Tensor& t) { return constant_(t, 0.0); }

Tensor& xavier_uniform_(Tensor& t, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const double std = gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
  const double a = std::sqrt(3.0) * std;  // uniform(-a, a) has standard deviation a / sqrt 3
  return uniform_(t, -a, a);
}

Tensor& xavier_normal_(Tensor& t, double gain) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)));
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  const std::int64_t fan = mode == FanMode::FanIn ? fan_in : fan_out;
  KILN_CHECK_VALUE(fan > 0, "Initializing zero-element tensors is a no-op");
  return calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  if (t.numel() == 0) return t;
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nonlinearity);
  return uniform_(t, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, const std::string& nonlinearity) {
  if (t.numel() == 0) return t;
  return normal_(t, 0.0, kaiming_std(t, a, mode, nonlinearity));
}

}  // namespace kiln::nn::init
