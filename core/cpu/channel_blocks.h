// core/cpu/channel_blocks.h — a [N, C, H, W] activation that crosses from one fused kernel to
// the next in oneDNN's channel-blocked layout, held as the 5-D contiguous tensor
// [N, C / B, H, W, B] that the layout is. See Note [Channel blocks across a layer boundary].
// Read next: compile/passes/propagate_channel_blocks.cpp (the pass that makes them).
#pragma once

#include <cstdint>

#include "core/kernel_params.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kiln::cpu {

// Note [Channel blocks across a layer boundary]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// oneDNN's convolution reads its input in channel blocks (nChw16c on AVX-512): element
// (n, c, h, w) at ((n·C/B + c/B)·H·W + h·W + w)·B + c % B; its AMX BFloat16 kernels read
// channels-last (nhwc), which is the same with one block of all C channels (B = C). Where the input is the previous
// layer's output, eager Kiln writes it in NCHW and the primitive reorders it, in the forward
// and again in the weight gradient, and its input gradient comes back blocked to be reordered
// to NCHW: for train_cnn's second layer three passes over 3.2 MB a step. When C is a whole
// number of blocks, that layout is a plain contiguous tensor of shape [N, C/B, H, W, B], so a
// compiled step can hold the activation so (compile/passes/propagate_channel_blocks.cpp): the
// previous layer's fused kernel writes it there, the primitives read it with no reorder. The
// 5-D shape is the sign: the fused kernels that take a [N, C, H, W] activation (the thin
// convolution pooled as it is made, its weight gradient read through its pool, and oneDNN's
// convolution pooled where it lies and its backward) also take it blocked. Eager ops never see
// one.

/// Whether `t` is an activation held in channel blocks.
inline bool holds_channel_blocks(const Tensor& t) { return t.dim() == 5; }

/// The [N, C, H, W] sizes of an activation, held plain or in channel blocks.
inline Shape nchw_sizes(const Tensor& t) {
  if (!holds_channel_blocks(t)) return t.sizes().vec();
  return {t.sizes()[0], t.sizes()[1] * t.sizes()[4], t.sizes()[2], t.sizes()[3]};
}

/// The layout of the 5-D tensor [n, c / block, h, w, block].
inline ChannelBlockedLayout dense_channel_blocks(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                                                 std::int64_t block) {
  return {block, c * h * w, block * h * w, block * w, block, n * c * h * w};
}

/// Whether two layouts of a [N, C, H, W] activation put every element at the same address:
/// equal, or both with the channels of a pixel side by side (blocks that follow each other, as
/// channels-last is described, or one block of all C).
inline bool same_addresses(const ChannelBlockedLayout& a, const ChannelBlockedLayout& b, std::int64_t channels) {
  const auto side_by_side = [channels](const ChannelBlockedLayout& l) {
    return l.stride_block == l.block || channels <= l.block;
  };
  return a.stride_n == b.stride_n && a.stride_h == b.stride_h && a.stride_w == b.stride_w &&
         ((a.block == b.block && a.stride_block == b.stride_block) || (side_by_side(a) && side_by_side(b)));
}

/// Where plane (image n, channel c) of a [N, C, H, W] activation starts, and the step from
/// one of its elements to the next: plain, or in channel blocks of `block` (0: plain).
struct PlaneStart {
  std::int64_t offset, step;
};
inline PlaneStart plane_start(std::int64_t plane, std::int64_t channels, std::int64_t plane_size,
                              std::int64_t block) {
  if (block == 0) return {plane * plane_size, 1};
  const std::int64_t n = plane / channels, c = plane % channels;
  return {((n * (channels / block) + c / block) * plane_size) * block + c % block, block};
}

}  // namespace kiln::cpu
