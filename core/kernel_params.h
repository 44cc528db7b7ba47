// core/kernel_params.h — the plain parameters kernels take besides tensors: convolution
// geometry, the reduction and random-number kinds, one Adam step's scalars. Free of Tensor,
// so the CUDA kernels (compiled by nvcc, see core/cuda/launch.h) can use them too.
// Read next: core/kernels.h.
#pragma once

#include <cstdint>

namespace kiln {

/// The geometry of im2col/col2im for a batch of [N, C, H, W] images.
struct Im2ColGeometry {
  std::int64_t channels = 0, height = 0, width = 0;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t out_h = 0, out_w = 0;
  bool operator==(const Im2ColGeometry&) const = default;
};

/// Where a [N, C, H, W] tensor's elements lie when its channels come in blocks of `block`
/// lanes, innermost (oneDNN's nChw16c and nChw8c, the layouts its convolutions prefer):
/// element (n, c, h, w) is at n * stride_n + (c / block) * stride_block + h * stride_h +
/// w * stride_w + c % block. The last block is padded to `block` lanes; `elements` counts the
/// whole buffer, padding included. Only compiled steps' fused kernels see such a buffer (Note
/// [A convolution's blocked output pooled where it lies] in core/cpu/pool.cpp).
struct ChannelBlockedLayout {
  std::int64_t block = 0, stride_n = 0, stride_block = 0, stride_h = 0, stride_w = 0, elements = 0;
  bool operator==(const ChannelBlockedLayout&) const = default;
};

/// Which pooling a PoolKernels call computes; the averages differ in the divisor at the
/// borders: the whole window, or only its elements inside the input.
enum class PoolMode : std::uint8_t { Max, AverageCountingPadding, AverageSkippingPadding };

enum class RandomKind : std::uint8_t { Uniform, Normal, IntRange, Bernoulli };

/// The scalars of one Adam/AdamW update (see optim/adam.h for the rule).
struct AdamStep {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double bias_correction1 = 1.0, bias_correction2 = 1.0;
  bool decoupled_weight_decay = false, amsgrad = false, maximize = false;
};

/// One SGD update's settings (optim/sgd.h). first_step: the momentum buffer is new and takes
/// the gradient as it is (PyTorch's clone on the first step), ignoring dampening.
struct SgdStep {
  double lr = 1e-3, momentum = 0.0, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false, maximize = false, first_step = false;
};

enum class ReduceOp : std::uint8_t { Sum, Prod, Amax, Amin, kCount };

}  // namespace kiln
