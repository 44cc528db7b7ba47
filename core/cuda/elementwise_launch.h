// core/cuda/elementwise_launch.h — an elementwise launch's struct (core/cuda/launch.h) from the
// loop geometry the CPU uses too (core/loop_geometry.h): the same broadcast strides and merged
// dims, turned outermost-first and counted in elements, as the CUDA kernels index. Plain C++,
// so the CPU's tests check it (tests/core/test_loop_geometry.cpp) where no GPU runs it.
// Read next: core/cuda/loops.cuh (how the kernels walk the struct).
#pragma once

#include <array>
#include <cstdint>

#include "core/cuda/launch.h"
#include "core/error.h"
#include "core/loop_geometry.h"
#include "core/tensor.h"

namespace kiln::cuda {

/// The launch struct for `operands` (operand 0 the output, the others broadcast to its shape).
template <int N>
Elementwise<N> elementwise_launch(const std::array<const Tensor*, N>& operands) {
  const Tensor& out = *operands[0];
  const Loop<N> loop = make_loop<N>(out.sizes(), operands);
  KILN_CHECK(loop.ndim <= kMaxDims, "CUDA kernels index at most ", kMaxDims,
             " dimensions after merging, got a layout that needs ", loop.ndim, " (call contiguous() first)");
  Elementwise<N> e{};
  e.dims = loop.ndim;
  e.numel = loop.numel;
  e.contiguous = loop.ndim == 1;
  for (int k = 0; k < N; ++k) {
    const Tensor& t = *operands[static_cast<std::size_t>(k)];
    const auto element_size = static_cast<std::int64_t>(t.element_size());
    e.data[k] = static_cast<char*>(t.numel() == 0 ? nullptr : t.raw_data_ptr());
    e.dtype[k] = t.dtype();
    for (int d = 0; d < e.dims; ++d) {
      // The loop runs innermost first in bytes; the kernels outermost first in elements.
      const int loop_d = e.dims - 1 - d;
      e.strides[k][d] = loop.strides[loop_d][static_cast<std::size_t>(k)] / element_size;
    }
    // One flat run where each operand steps by one element (a single element counts too).
    if (e.dims == 1 && loop.sizes[0] > 1) e.contiguous &= e.strides[k][0] == 1;
  }
  for (int d = 0; d < e.dims; ++d) e.sizes[d] = loop.sizes[e.dims - 1 - d];
  return e;
}

}  // namespace kiln::cuda
