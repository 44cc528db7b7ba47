// nn/conv.cpp — the Conv2d layer.
#include "nn/conv.h"

#include <cmath>

#include "core/capture_hooks.h"
#include "core/creation.h"
#include "nn/init.h"

namespace kiln::nn {

Conv2d::Conv2d(std::int64_t in, std::int64_t out, Pair k, Conv2dOptions o)
    : Module("Conv2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k),
      options(o),
      weight(register_parameter("weight", empty({out, in / std::max<std::int64_t>(o.groups, 1), k[0], k[1]}))),
      bias(register_parameter("bias", o.bias ? empty({out}) : Tensor())) {
  KILN_CHECK_VALUE(o.groups > 0, "groups must be a positive integer");
  KILN_CHECK_VALUE(in % o.groups == 0, "in_channels must be divisible by groups");
  KILN_CHECK_VALUE(out % o.groups == 0, "out_channels must be divisible by groups");
  reset_parameters();
}

namespace {

/// PyTorch's _ConvNd.reset_parameters, for plain and transposed weights alike: fan_in is dim 1
/// times the receptive field, which for a transposed weight [in, out, kh, kw] is out * kh * kw.
void reset_conv_parameters(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const auto fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

}  // namespace

void Conv2d::reset_parameters() { reset_conv_parameters(weight, bias); }

Tensor Conv2d::forward(const Tensor& input) {
  return conv2d(input, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

std::string Conv2d::extra_repr() const {
  std::string s = detail::str_cat(in_channels, ", ", out_channels, ", kernel_size=(", kernel_size[0], ", ",
                                  kernel_size[1], "), stride=(", options.stride[0], ", ", options.stride[1], ")");
  if (options.padding != Pair{0, 0}) s += detail::str_cat(", padding=(", options.padding[0], ", ", options.padding[1], ")");
  if (options.dilation != Pair{1, 1}) s += detail::str_cat(", dilation=(", options.dilation[0], ", ", options.dilation[1], ")");
  if (options.groups != 1) s += detail::str_cat(", groups=", options.groups);
  if (!options.bias) s += ", bias=False";
  return s;
}

ConvTranspose2d::ConvTranspose2d(std::int64_t in, std::int64_t out, Pair k, ConvTranspose2dOptions o)
    : Module("ConvTranspose2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k),
      options(o),
      weight(register_parameter("weight", empty({in, out, k[0], k[1]}))),
      bias(register_parameter("bias", o.bias ? empty({out}) : Tensor())) {
  reset_parameters();
}

void ConvTranspose2d::reset_parameters() { reset_conv_parameters(weight, bias); }

Tensor ConvTranspose2d::forward(const Tensor& input) {
  capture::Scope scope(this, "ConvTranspose2d", {&input});  // Note [Layer scopes]
  const Tensor y = conv_transpose2d(input, weight, bias, options.stride, options.padding, options.output_padding,
                                    options.dilation);
  scope.returns({&y});
  return y;
}

std::string ConvTranspose2d::extra_repr() const {
  std::string s = detail::str_cat(in_channels, ", ", out_channels, ", kernel_size=(", kernel_size[0], ", ",
                                  kernel_size[1], "), stride=(", options.stride[0], ", ", options.stride[1], ")");
  if (options.padding != Pair{0, 0}) s += detail::str_cat(", padding=(", options.padding[0], ", ", options.padding[1], ")");
  if (!options.bias) s += ", bias=False";
  return s;
}

}  // namespace kiln::nn
