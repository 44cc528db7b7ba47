// core/cpu/conv_routes.cpp — the CPU's convolution kernels as its table holds them. Each pass
// takes the route that routes::kConvolution's rules name (core/routes.h): Kiln's thin kernels
// for a thin layer, oneDNN's primitive where it is built in and serves the dtype, else Kiln's
// reference kernels (core/cpu/conv.cpp), which also take what oneDNN builds no primitive for.
// A pass with no thin kernel of its own (the input gradient, the oneDNN-only fusions) goes on
// to the next rule. On the oneDNN route a BFloat16 weight gradient that Kiln's pair kernel
// serves takes it (Note [A weight gradient in BFloat16 pairs]).
// Read next: core/routes.h, core/cpu/conv_thin.cpp, core/onednn/conv.cpp.
#include "core/cpu/conv_weight_gradient_pairs.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/pool_record.h"
#include "core/onednn/onednn.h"
#include "core/routes.h"

namespace kiln::cpu::routed {

namespace {

routes::Route route_of(const Tensor& input, const Tensor& weight, std::int64_t groups) {
  return routes::cpu_conv2d(input.dtype(), weight.sizes(), groups);
}

void forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
             std::int64_t groups, bool relu) {
  switch (route_of(input, weight, groups)) {
    case routes::Route::Thin: return thin_conv2d_forward(out, input, weight, bias, g, relu);
    case routes::Route::OneDnn:
      if (onednn::conv2d_forward(out, input, weight, bias, g, groups, relu)) return;
      break;
    default: break;
  }
  if (relu) return conv2d_forward_relu_kernel(out, input, weight, bias, g, groups);
  conv2d_forward_kernel(out, input, weight, bias, g, groups);
}

}  // namespace

void conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const Im2ColGeometry& g, std::int64_t groups) {
  forward(out, input, weight, bias, g, groups, /*relu=*/false);
}

void conv2d_forward_relu(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Im2ColGeometry& g, std::int64_t groups) {
  forward(out, input, weight, bias, g, groups, /*relu=*/true);
}

void conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                           const Im2ColGeometry& g, std::int64_t groups) {
  const bool onednn = route_of(grad_input, weight, groups) != routes::Route::Eigen;  // no thin input gradient
  if (onednn && onednn::conv2d_backward_input(grad_input, grad_output, weight, g, groups)) return;
  conv2d_backward_input_kernel(grad_input, grad_output, weight, g, groups);
}

void conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                            const Im2ColGeometry& g, std::int64_t groups) {
  switch (route_of(input, grad_weight, groups)) {
    case routes::Route::Thin: return thin_conv2d_weight_gradient(grad_weight, grad_output, input, g);
    case routes::Route::OneDnn:
      if (conv2d_weight_gradient_in_pairs(grad_weight, Tensor(), grad_output, {}, input, {}, g)) return;
      if (onednn::conv2d_backward_weight(grad_weight, grad_output, input, g, groups)) return;
      break;
    default: break;
  }
  conv2d_backward_weight_kernel(grad_weight, grad_output, input, g, groups);
}

void conv2d_backward_weight_bias(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                 const Tensor& input, const Im2ColGeometry& g, std::int64_t groups) {
  switch (route_of(input, grad_weight, groups)) {
    case routes::Route::Thin: return thin_conv2d_weight_gradient(grad_weight, grad_output, input, g, grad_bias);
    case routes::Route::OneDnn: {
      if (conv2d_weight_gradient_in_pairs(grad_weight, grad_bias, grad_output, {}, input, {}, g)) return;
      if (onednn::conv2d_backward_weight_bias(grad_weight, grad_bias, grad_output, input, g, groups)) return;
      // What the unfused pair computes on this route: the weight gradient, then Kiln's sum.
      conv2d_backward_weight(grad_weight, grad_output, input, g, groups);
      const ReduceKernel sum = registered_kernels(DeviceType::CPU).reduce[static_cast<std::size_t>(ReduceOp::Sum)];
      return sum(grad_bias, grad_output, {0, 2, 3}, 1.0);
    }
    default: break;
  }
  conv2d_backward_weight_bias_kernel(grad_weight, grad_bias, grad_output, input, g, groups);
}

void conv2d_forward_relu_max_pool(const Tensor& values, const Tensor& indices, const Tensor& input,
                                  const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                  const Im2ColGeometry& pool, std::int64_t groups) {
  switch (route_of(input, weight, groups)) {
    case routes::Route::Thin:
      if (pools_whole_2x2_windows(pool)) {
        return thin_conv2d_forward_relu_max_pool(values, indices, input, weight, bias, g, pool);
      }
      break;
    case routes::Route::OneDnn:
      if (onednn::conv2d_forward_relu_max_pool(values, indices, input, weight, bias, g, pool, groups)) return;
      break;
    default: break;
  }
  conv2d_forward_relu_max_pool_kernel(values, indices, input, weight, bias, g, pool, groups);
}

void conv2d_backward_weight_bias_through_max_pool(const Tensor& grad_weight, const Tensor& grad_bias,
                                                  const Tensor& grad_pooled, const Tensor& indices,
                                                  const Tensor& values, const Tensor& input, const Im2ColGeometry& g,
                                                  std::int64_t groups) {
  switch (route_of(input, grad_weight, groups)) {
    case routes::Route::Thin:
      return thin_conv2d_weight_gradient_through_max_pool(grad_weight, grad_pooled, indices, values, input, g,
                                                          grad_bias);
    case routes::Route::OneDnn:
      if (onednn::conv2d_backward_weight_bias_through_max_pool(grad_weight, grad_bias, grad_pooled, indices, values,
                                                               input, g, groups)) {
        return;
      }
      break;
    default: break;
  }
  conv2d_backward_weight_bias_through_max_pool_kernel(grad_weight, grad_bias, grad_pooled, indices, values, input, g,
                                                      groups);
}

void conv2d_backward_through_max_pool(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                      const Tensor& grad_pooled, const Tensor& indices, const Tensor& values,
                                      const Tensor& weight, const Tensor& input, const Im2ColGeometry& g,
                                      std::int64_t groups) {
  if (route_of(input, weight, groups) == routes::Route::OneDnn &&
      onednn::conv2d_backward_through_max_pool(grad_input, grad_weight, grad_bias, grad_pooled, indices, values,
                                               weight, input, g, groups)) {
    return;
  }
  conv2d_backward_through_max_pool_kernel(grad_input, grad_weight, grad_bias, grad_pooled, indices, values, weight,
                                          input, g, groups);
}

}  // namespace kiln::cpu::routed
