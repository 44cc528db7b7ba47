// core/cpu/conv_weight_gradient_pairs.h — a BFloat16 convolution's weight and bias gradients
// with AVX512_BF16's pair products, for the CPUs where they beat oneDNN 2.6's primitive. See
// Note [A weight gradient in BFloat16 pairs].
// Read next: core/cpu/conv_weight_gradient_pairs.cpp.
#pragma once

#include "core/kernel_params.h"

namespace kiln {
class Tensor;
}

namespace kiln::cpu {

/// The weight gradient [O, C, kh, 3] (contiguous) and, where `grad_bias` is defined, the bias
/// gradient (O elements, contiguous) of a BFloat16 convolution of unit stride and dilation and
/// one group, from `grad_output` [N, O, out_h, out_w] and `input` [N, C, H, W]. Each activation lies at
/// its layout: in channel blocks of 16 (block 16), or plain contiguous NCHW (block 0). Returns
/// false, having run nothing, where the kernel does not serve the call (no AVX512_BF16 in the
/// build, oneDNN on AMX, another dtype or geometry); on meta tensors it serves and computes
/// nothing.
bool conv2d_weight_gradient_in_pairs(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                     const ChannelBlockedLayout& grad_output_layout, const Tensor& input,
                                     const ChannelBlockedLayout& input_layout, const Im2ColGeometry& g);

}  // namespace kiln::cpu
