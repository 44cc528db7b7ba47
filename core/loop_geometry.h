// core/loop_geometry.h — the geometry of an elementwise loop over N tensors, worked out once
// for every backend: make_loop() aligns each operand's strides to the output's shape (stride 0
// where an operand is broadcast), drops size-1 dims and merges dims that are contiguous with
// each other, so a contiguous tensor of any rank becomes one flat loop. The CPU walks it
// directly (core/cpu/loops.h); CUDA copies it into its launch struct (core/cuda/elementwise_launch.h).
// Read next: core/cpu/loops.h.
#pragma once

#include <array>
#include <cstdint>

#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace kiln {

inline constexpr int kMaxLoopDims = 16;

/// The geometry of an N-operand elementwise loop (operand 0 is the output), innermost dim
/// first, strides in bytes.
template <int N>
struct Loop {
  int ndim = 1;
  std::int64_t numel = 0;
  std::int64_t sizes[kMaxLoopDims];
  std::array<std::int64_t, N> strides[kMaxLoopDims];
};

template <int N>
Loop<N> make_loop(IntArrayRef shape, const std::array<const Tensor*, N>& operands) {
  const int ndim = static_cast<int>(shape.size());
  KILN_CHECK(ndim <= kMaxLoopDims, "Kiln's elementwise kernels support up to ", kMaxLoopDims,
             " dimensions (got ", ndim, ")");
  Loop<N> loop;
  loop.numel = compute_numel(shape);
  int out_d = 0;
  for (int d = ndim - 1; d >= 0; --d) {  // innermost first
    if (shape[d] == 1) continue;
    loop.sizes[out_d] = shape[d];
    for (int k = 0; k < N; ++k) {
      const Tensor& t = *operands[k];
      const int td = d - (ndim - static_cast<int>(t.dim()));
      const bool broadcast = td < 0 || t.sizes()[td] == 1;
      loop.strides[out_d][k] =
          broadcast ? 0 : t.strides()[td] * static_cast<std::int64_t>(t.element_size());
    }
    ++out_d;
  }
  if (out_d == 0) {
    loop.sizes[0] = 1;
    loop.strides[0].fill(0);
    out_d = 1;
  }
  // Merge dim i+1 into dim i when every operand steps through them as one run.
  int merged = 0;
  for (int d = 1; d < out_d; ++d) {
    bool can_merge = true;
    for (int k = 0; k < N; ++k) {
      if (loop.strides[d][k] != loop.strides[merged][k] * loop.sizes[merged]) can_merge = false;
    }
    if (can_merge) {
      loop.sizes[merged] *= loop.sizes[d];
    } else {
      ++merged;
      loop.sizes[merged] = loop.sizes[d];
      loop.strides[merged] = loop.strides[d];
    }
  }
  loop.ndim = merged + 1;
  return loop;
}

}  // namespace kiln
