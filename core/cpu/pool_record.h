// core/cpu/pool_record.h — a 2x2, stride-2 max pool's winner and relu's verdict in one byte per
// window: what a compiled step keeps between a fused convolution + relu + pool and its backward
// in place of Int64 indices and a second read of the pooled values. See Note [A pool window in
// one byte].
// Read next: compile/passes/record_pool_windows.cpp (the pass that asks for records).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/kernel_params.h"
#include "core/tensor.h"

namespace kiln::cpu {

// Note [A pool window in one byte]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `V, I = max_pool2d(relu(conv(x)))` keeps I, an Int64 flat position per window, for the
// backward, which also reads V again to apply relu's backward (Note [Relu's backward through a
// max pool]). For train_cnn's first layer at batch 128 that is 6.4 MB of I written and read,
// and 3.2 MB of V read, to say for each window which of its four cells won and whether its
// value was positive: three bits. When the pool is 2x2 with stride 2 and no padding (window
// (py, px) covers rows 2py, 2py + 1 and columns 2px, 2px + 1), a record of one byte holds them:
//   bit 0   the winner is in the right column
//   bit 1   the winner is in the lower row
//   bit 2   the pooled value passes relu's backward: !(V <= 0) on V as stored (NaN passes)
// so the winner's flat position is (2py + lower) * width + 2px + right. A record tensor is
// UInt8 and the same shape as I; kernels that take indices read records when given UInt8
// (the dtype is the only sign, as Int64 is for indices). Only compiled steps make them
// (compile/passes/record_pool_windows.cpp); eager max_pool2d returns PyTorch's Int64 indices.
// Exactness: a record names the same winner as the index it replaces, and its bit is the test
// threshold_backward makes on the same stored value, so the backward's sums are the same sums.

inline constexpr DType kPoolRecordDType = kUInt8;

/// Whether `indices` holds window records rather than Int64 positions.
inline bool holds_pool_records(const Tensor& indices) { return indices.dtype() == kPoolRecordDType; }

/// Whether `pool` is 2x2 with stride 2, no padding or dilation, and every window whole: the
/// pools that can keep records (and that the thin convolution pools as it makes its rows).
bool pools_whole_2x2_windows(const Im2ColGeometry& pool);

/// A record in `Bits` (wider than a byte where a vectorised loop keeps it in int lanes).
template <class Bits = std::uint8_t>
Bits pool_record(bool lower, bool right, bool passes) {
  return static_cast<Bits>(static_cast<Bits>(right) | static_cast<Bits>(lower) << 1 | static_cast<Bits>(passes) << 2);
}

/// The flat position of window (py, px)'s winner in a plane `width` wide.
inline std::int64_t pool_record_winner(std::uint8_t record, std::int64_t py, std::int64_t px, std::int64_t width) {
  return (2 * py + (record >> 1 & 1)) * width + 2 * px + (record & 1);
}

/// Which of the window's cells won, in pool_plane's tap order: 0 upper left, 1 upper right,
/// 2 lower left, 3 lower right (a record in `Bits`, as pool_record makes it).
template <class Bits = std::uint8_t>
Bits pool_record_cell(Bits record) {
  return static_cast<Bits>(record & Bits{3});
}

/// Whether relu's backward lets the window's gradient through (a record in `Bits`, as pool_record
/// makes it).
template <class Bits = std::uint8_t>
bool pool_record_passes(Bits record) {
  return (record & Bits{4}) != 0;
}

/// Records [N, C, oh, ow] for max_pool2d's `indices` into planes `width` wide and its `values`.
void pool_records_from_indices(const Tensor& records, const Tensor& indices, const Tensor& values,
                               std::int64_t width);

/// Int64 indices [N, C, oh, ow] for `records` into planes `width` wide.
void pool_indices_from_records(const Tensor& indices, const Tensor& records, std::int64_t width);

}  // namespace kiln::cpu
