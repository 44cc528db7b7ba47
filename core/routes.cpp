// core/routes.cpp — each family's rules (core/routes.h) applied in order.
#include "core/routes.h"

#include "core/backends.h"
#include "core/kernels.h"
#include "core/meta_allocations.h"
#include "core/ops/batch_norm.h"
#include "core/tensor.h"

namespace kiln::routes {

namespace {

/// The device type whose table a tensor's op runs on, or Meta for a meta tensor that stands
/// for no device (a shape-only run, which has no kernels).
DeviceType table_of(const Tensor& t) { return route_device_type(t.device()); }

bool op_kernels_on(DeviceType type, backends::OpFamily family) {
  return type != DeviceType::Meta && backends::op_kernels_enabled(type, family);
}

}  // namespace

bool onednn_serves(DType dtype) {
  return backends::onednn_is_available() &&
         (dtype == DType::Float32 || (dtype == DType::BFloat16 && backends::onednn_has_bf16()));
}

const char* name(Route route) {
  switch (route) {
    case Route::Composite: return "composite";
    case Route::Cuda: return "cuda";
    case Route::Thin: return "thin";
    case Route::OneDnn: return "onednn";
    case Route::Eigen: return "eigen";
  }
  return "?";
}

Route cpu_conv2d(DType dtype, IntArrayRef weight_sizes, std::int64_t groups) {
  std::int64_t taps_per_output = 1;  // C/groups · kh · kw
  for (std::size_t d = 1; d < weight_sizes.size(); ++d) taps_per_output *= weight_sizes[d];
  const bool float_kernels = dtype == DType::Float32 || dtype == DType::BFloat16;
  if (groups == 1 && float_kernels && taps_per_output <= kThinConvolutionTaps) return Route::Thin;
  if (onednn_serves(dtype)) return Route::OneDnn;
  return Route::Eigen;
}

Route conv2d(const Tensor& input, IntArrayRef weight_sizes, std::int64_t groups) {
  const DeviceType type = table_of(input);
  if (!op_kernels_on(type, backends::OpFamily::Convolution) || kernels_for(type).conv2d.forward == nullptr) {
    return Route::Composite;
  }
  if (type == DeviceType::CUDA) return Route::Cuda;
  return cpu_conv2d(input.dtype(), weight_sizes, groups);
}

Route pool2d(const Tensor& input, const Im2ColGeometry& g) {
  const DeviceType type = table_of(input);
  if (!op_kernels_on(type, backends::OpFamily::Pooling) || kernels_for(type).pool2d.forward == nullptr ||
      g.dilation_h != 1 || g.dilation_w != 1) {
    return Route::Composite;
  }
  return type == DeviceType::CUDA ? Route::Cuda : Route::Eigen;
}

Route batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                 const Tensor& running_var) {
  const DeviceType type = table_of(input);
  if (!op_kernels_on(type, backends::OpFamily::BatchNorm) || kernels_for(type).batch_norm.forward == nullptr ||
      !input.is_floating_point()) {
    return Route::Composite;
  }
  const DType stats = ops::batch_norm_stat_dtype(input.dtype());
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    if (t->defined() && (t->dtype() != stats || t->device() != input.device())) return Route::Composite;
  }
  return type == DeviceType::CUDA ? Route::Cuda : Route::Eigen;
}

Route cpu_matrix_product(const Tensor& out, const Tensor& a, const Tensor& b) {
  // In double: the count only picks a route, and out.numel() * k can pass int64.
  const double multiply_adds = static_cast<double>(out.numel()) * static_cast<double>(a.sizes()[2]);
  const bool onednn = backends::op_kernels_enabled(DeviceType::CPU, backends::OpFamily::MatrixProduct) &&
                      onednn_serves(out.dtype()) && a.dtype() == out.dtype() && b.dtype() == out.dtype() &&
                      multiply_adds >= static_cast<double>(kMinOneDnnMultiplyAdds);
  return onednn ? Route::OneDnn : Route::Eigen;
}

}  // namespace kiln::routes
