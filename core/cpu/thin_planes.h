// core/cpu/thin_planes.h — how the thin convolution kernels hold an image: its few input planes
// widened to float and copied into zero-filled buffers, so window taps off the image read zeros
// instead of needing bounds checks. Shared by the kernels that slide the planes under output
// columns (core/cpu/conv_thin.cpp) and those that hold output channels in lanes
// (core/cpu/conv_thin_channel_lanes.cpp), so both read the same padded values.
// Read next: core/cpu/conv_thin.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "core/kernel_params.h"

namespace kiln::cpu::thin {

/// Eight float lanes (one AVX register, or two SSE ones), loaded from any address.
using Lanes = float __attribute__((vector_size(32)));
inline constexpr std::int64_t kLanes = 8;

inline Lanes load(const float* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

/// Values of T as the float the kernels compute in.
template <class T>
void widen(const T* from, std::int64_t n, float* to) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(from, from + n, to);
  } else {
    for (std::int64_t i = 0; i < n; ++i) to[i] = to_op_math(from[i]);
  }
}

/// A plane copied into a zero-filled buffer `pad_top`/`pad_left` in from its top-left corner,
/// so window taps off the image read zeros instead of needing bounds checks.
template <class T>
void pad_plane(const T* plane, std::int64_t height, std::int64_t width, std::int64_t pad_top, std::int64_t pad_left,
               std::int64_t padded_width, float* out, std::int64_t padded_height) {
  std::fill(out, out + padded_height * padded_width, 0.0f);
  for (std::int64_t y = 0; y < height; ++y) widen(plane + y * width, width, out + (y + pad_top) * padded_width + pad_left);
}

/// How the direct kernels lay out one image: each output row padded to `row_width` columns
/// (whole chunks of kLanes at unit stride), and each input plane copied into a zero-filled
/// in_height x in_width buffer in which every tap of every padded output column reads inside.
/// The buffer also holds the whole padded image: a stride that does not divide the image
/// leaves its last rows and columns unread, but pad_plane copies them all (28x28, 3x3, stride
/// 2, no padding reads 27 of 28 columns).
struct PaddedImage {
  std::int64_t row_width, in_height, in_width;
  explicit PaddedImage(const Im2ColGeometry& g) {
    const std::int64_t chunks = (g.out_w + kLanes - 1) / kLanes;
    row_width = g.stride_w == 1 ? chunks * kLanes : g.out_w;
    in_height = std::max((g.out_h - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1, g.height + g.pad_h);
    in_width = std::max((row_width - 1) * g.stride_w + (g.kernel_w - 1) * g.dilation_w + 1, g.width + g.pad_w);
  }
  /// Copies the C planes of one image into `buffer` (C · in_height · in_width floats).
  template <class T>
  void pad_image(const T* image, std::int64_t channels, const Im2ColGeometry& g, float* buffer) const {
    for (std::int64_t c = 0; c < channels; ++c) {
      pad_plane(image + c * g.height * g.width, g.height, g.width, g.pad_h, g.pad_w, in_width,
                buffer + c * in_height * in_width, in_height);
    }
  }
};

}  // namespace kiln::cpu::thin
