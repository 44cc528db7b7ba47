// core/conv_route.cpp — conv2d_route: kConvRouteRules applied in order.
#include "core/conv_route.h"

#include "core/backends.h"
#include "core/kernels.h"
#include "core/meta_allocations.h"
#include "core/tensor.h"

namespace kiln {

namespace {
constexpr bool rules_in_route_order() {
  for (std::size_t i = 0; i < kConvRouteRules.size(); ++i) {
    if (static_cast<std::size_t>(kConvRouteRules[i].route) != i) return false;
  }
  return true;
}
static_assert(rules_in_route_order(), "kConvRouteRules lists one rule per ConvRoute, in the enum's order");
}  // namespace

const ConvRouteRule& conv_route_rule(ConvRoute route) { return kConvRouteRules[static_cast<std::size_t>(route)]; }

ConvRoute cpu_conv2d_route(DType dtype, IntArrayRef weight_sizes, std::int64_t groups) {
  std::int64_t taps_per_output = 1;  // C/groups · kh · kw
  for (std::size_t d = 1; d < weight_sizes.size(); ++d) taps_per_output *= weight_sizes[d];
  const bool float_kernels = dtype == DType::Float32 || dtype == DType::BFloat16;
  if (groups == 1 && float_kernels && taps_per_output <= kThinConvolutionTaps) return ConvRoute::Thin;
  const bool onednn_serves = dtype == DType::Float32 || (dtype == DType::BFloat16 && backends::onednn_has_bf16());
  if (backends::onednn_is_available() && onednn_serves) return ConvRoute::OneDnn;
  return ConvRoute::Eigen;
}

ConvRoute conv2d_route(const Tensor& input, IntArrayRef weight_sizes, std::int64_t groups) {
  const DeviceType type = route_device_type(input.device());
  if (type == DeviceType::Meta || !backends::op_kernels_enabled(type, backends::OpFamily::Convolution) ||
      kernels_for(type).conv2d.forward == nullptr) {
    return ConvRoute::Composite;
  }
  if (type == DeviceType::CUDA) return ConvRoute::CuDnn;
  return cpu_conv2d_route(input.dtype(), weight_sizes, groups);
}

}  // namespace kiln
