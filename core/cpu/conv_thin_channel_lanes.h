// core/cpu/conv_thin_channel_lanes.h — the thin convolution's pooled forward and its weight
// gradient through the pool with output channels in vector lanes, for a compiled step whose
// pooled activation lies in channel blocks. See Note [Output channels in lanes].
// Read next: core/cpu/conv_thin_channel_lanes.cpp.
#pragma once

#include <cstdint>

#include "core/kernel_params.h"

namespace kiln::cpu {

/// A thin convolution followed by relu and a 2x2 / stride 2 max pool, as the channel-lane
/// kernels see it: the pooled side (values, or their gradient) in channel blocks of `block`
/// (one block of all channels for channels-last), window records in [N, O, pool_h, pool_w].
struct ThinPooledLayer {
  std::int64_t images, input_channels, output_channels;
  Im2ColGeometry conv;
  std::int64_t block, pool_h, pool_w;
};

/// Whether the channel-lane kernels compute `layer`: a 3x3 kernel at unit column stride over
/// 1 or 3 input channels, whose output channels fill whole vectors inside each block.
bool channel_lanes_take(const ThinPooledLayer& layer);

/// thin_conv2d_forward_relu_max_pool's values (in blocks) and records, the same bits, from
/// weights [O, C, 3, 3] and bias [O] (or nullptr) in float.
template <class T>
void channel_lanes_forward_relu_max_pool(const ThinPooledLayer& layer, T* values, std::uint8_t* records,
                                         const T* input, const float* weight, const float* bias);

/// How many threads the channel-lane weight gradient can keep busy: one per vector of output
/// channels (each vector's sums run over the images in order, as each channel's do in
/// conv_thin.cpp); with more threads than that, conv_thin.cpp's kernel, one channel a thread,
/// uses them all for the same bits.
std::int64_t channel_lanes_weight_gradient_threads(const ThinPooledLayer& layer);

/// thin_conv2d_weight_gradient_through_max_pool's weight gradient [O, C, 3, 3] and bias
/// gradient [O] (or nullptr), the same bits, from the pooled gradient in blocks and the records.
template <class T>
void channel_lanes_weight_gradient_through_max_pool(const ThinPooledLayer& layer, T* grad_weight, T* grad_bias,
                                                    const T* grad_pooled, const std::uint8_t* records, const T* input);

}  // namespace kiln::cpu
