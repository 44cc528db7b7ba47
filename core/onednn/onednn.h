// core/onednn/onednn.h — the CPU's library route: convolution and matrix products through
// oneDNN (Debian's libdnnl-dev), the CPU's counterpart of cuDNN and cuBLAS. The 2-D pools and
// batch norm stay on Kiln's own kernels, which measured faster or more exact (see
// Note [What the CPU's library route covers] in core/onednn/register.cpp). Kiln's Eigen
// kernels stay what they were: the readable reference, and the fallback for what oneDNN does
// not serve (Float64, integer types, BFloat16 on a CPU without native BFloat16, a shape oneDNN
// has no kernel for). Built when CMake finds oneDNN (KILN_ONEDNN, cmake/KilnOneDnn.cmake);
// otherwise stub.cpp leaves the Eigen route in place. Which kernel a convolution runs is
// decided in one place, routes::cpu_conv2d (core/routes.h).
// Read next: core/onednn/runtime.h (primitives, their cache, running one), conv.cpp.
#pragma once

#include <cstdint>
#include <optional>

#include "core/kernels.h"

namespace kiln::onednn {

/// Puts oneDNN's kernels over the Eigen ones in the CPU's table (each falls back to the one it
/// replaces) and makes the library route the CPU's default. Without oneDNN it changes nothing.
void register_kernels(BackendKernels& table);

// oneDNN's convolution passes, for the CPU's route (core/cpu/conv_routes.cpp), which takes them
// where routes::cpu_conv2d says OneDnn. Each runs its pass and returns true, or runs nothing and
// returns false where oneDNN builds no primitive for the call (or is not built in: stub.cpp).
// Arguments as ConvKernels' (core/kernels.h); `relu` applies Kiln's relu after the forward.
bool conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const Im2ColGeometry& g, std::int64_t groups, bool relu);
bool conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                           const Im2ColGeometry& g, std::int64_t groups);
bool conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                            const Im2ColGeometry& g, std::int64_t groups);
bool conv2d_backward_weight_bias(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                 const Tensor& input, const Im2ColGeometry& g, std::int64_t groups);
/// The forward with relu, max-pooled by `pool` where the primitive's blocked output lies
/// (Note [A convolution's blocked output pooled where it lies] in core/cpu/pool.cpp).
bool conv2d_forward_relu_max_pool(const Tensor& values, const Tensor& indices, const Tensor& input,
                                  const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                  const Im2ColGeometry& pool, std::int64_t groups);
/// Both backward passes of the gradient max_pool2d_backward_relu makes, unpooled straight into the
/// layout both primitives read.
bool conv2d_backward_through_max_pool(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                      const Tensor& grad_pooled, const Tensor& indices, const Tensor& values,
                                      const Tensor& weight, const Tensor& input, const Im2ColGeometry& g,
                                      std::int64_t groups);
/// The weight and bias gradients alone of the gradient max_pool2d_backward_relu makes (a first
/// layer's backward), unpooled straight into the layout the weight primitive reads.
bool conv2d_backward_weight_bias_through_max_pool(const Tensor& grad_weight, const Tensor& grad_bias,
                                                  const Tensor& grad_pooled, const Tensor& indices,
                                                  const Tensor& values, const Tensor& input, const Im2ColGeometry& g,
                                                  std::int64_t groups);

/// The channel block B such that a convolution of this geometry reads its input, and writes its
/// input gradient, in the layout of a contiguous [N, C/B, H, W] x B (Note [Channel blocks across
/// a layer boundary] in core/cpu/channel_blocks.h), in its forward (with or without a bias) and
/// both backward passes; nullopt where any of them wants another layout or has no primitive.
std::optional<std::int64_t> conv2d_input_channel_block(DType dtype, IntArrayRef input, IntArrayRef weight,
                                                       const Im2ColGeometry& g, std::int64_t groups, bool with_bias);

}  // namespace kiln::onednn
