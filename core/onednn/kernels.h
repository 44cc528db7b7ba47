// core/onednn/kernels.h — the oneDNN kernels, declared for the registration list
// (core/onednn/register.cpp). Each has the signature of the CPU kernel it stands in for, and
// calls that kernel for what oneDNN does not serve.
// Read next: core/onednn/register.cpp.
#pragma once

#include "core/kernels.h"

namespace kiln::onednn {

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b);
void bmm_bias_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias, bool relu);
void conv2d_forward_kernel(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Im2ColGeometry& g, std::int64_t groups);
void conv2d_forward_relu_kernel(const Tensor& out, const Tensor& input, const Tensor& weight,
                                const Tensor& bias,
                           const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_input_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                                  const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_weight_kernel(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                                   const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_weight_bias_kernel(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                        const Tensor& input, const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_weight_bias_through_max_pool_kernel(const Tensor& grad_weight, const Tensor& grad_bias,
                                                         const Tensor& grad_pooled, const Tensor& indices,
                                                         const Tensor& values, const Tensor& input,
                                                         const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_through_max_pool_kernel(const Tensor& grad_input, const Tensor& grad_weight,
                                             const Tensor& grad_bias, const Tensor& grad_pooled, const Tensor& indices,
                                             const Tensor& values, const Tensor& weight, const Tensor& input,
                                             const Im2ColGeometry& g, std::int64_t groups);
void conv2d_forward_relu_max_pool_kernel(const Tensor& values, const Tensor& indices, const Tensor& input,
                                         const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                         const Im2ColGeometry& pool, std::int64_t groups);

}  // namespace kiln::onednn
