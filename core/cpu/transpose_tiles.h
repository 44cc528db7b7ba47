// core/cpu/transpose_tiles.h — a matrix of 1-, 2- or 4-byte elements transposed 16 x 16 tiles at
// a time: how the fused pooling kernels move a block of channels between channel-major planes
// ([N, C, h, w], what the next op reads) and pixel-major runs (a pixel's channels side by side,
// what a vector of lanes holds). Element by element, that move is a strided load or store per
// element, which compilers leave scalar: a third of the thin forward's time before it was tiled.
// Read next: core/cpu/conv_thin_channel_lanes.cpp, core/cpu/pool.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>

namespace kiln::cpu {

/// A row of 16 elements of `Bytes` bytes each, as unsigned integers (floats move as their bits).
template <std::size_t Bytes>
struct TileRow;
template <>
struct TileRow<1> {
  using type = std::uint8_t __attribute__((vector_size(16)));
};
template <>
struct TileRow<2> {
  using type = std::uint16_t __attribute__((vector_size(32)));
};
template <>
struct TileRow<4> {
  using type = std::uint32_t __attribute__((vector_size(64)));
};
template <class T>
using Row16 = typename TileRow<sizeof(T)>::type;

/// Transposes 16 rows of 16 elements in place: four rounds, each interleaving row i with row
/// i + 8, move every element to its transposed place (a perfect shuffle; 64 shuffles a tile).
template <class Row>
void transpose_16x16(Row (&rows)[16]) {
  constexpr Row low = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
  constexpr Row high = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  for (int round = 0; round < 4; ++round) {
    Row interleaved[16];
    for (int i = 0; i < 8; ++i) {
      interleaved[2 * i] = __builtin_shuffle(rows[i], rows[i + 8], low);
      interleaved[2 * i + 1] = __builtin_shuffle(rows[i], rows[i + 8], high);
    }
    std::copy(std::begin(interleaved), std::end(interleaved), std::begin(rows));
  }
}

/// to[c · to_stride + r] = from[r · from_stride + c] for r < rows, c < columns, for any T of 1,
/// 2 or 4 bytes: whole tiles through transpose_16x16 on T's bits, the edges element by element.
template <class T>
void transpose(const T* from, std::int64_t from_stride, std::int64_t rows, std::int64_t columns, T* to,
               std::int64_t to_stride) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "transpose moves 1-, 2- or 4-byte elements");
  std::int64_t r0 = 0;
  for (; r0 + 16 <= rows; r0 += 16) {
    std::int64_t c0 = 0;
    for (; c0 + 16 <= columns; c0 += 16) {
      Row16<T> tile[16];
      for (int i = 0; i < 16; ++i) std::memcpy(&tile[i], from + (r0 + i) * from_stride + c0, sizeof(tile[i]));
      transpose_16x16(tile);
      for (int j = 0; j < 16; ++j) {
        std::memcpy(static_cast<void*>(to + (c0 + j) * to_stride + r0), &tile[j], sizeof(tile[j]));
      }
    }
    for (; c0 < columns; ++c0) {
      for (std::int64_t r = r0; r < r0 + 16; ++r) to[c0 * to_stride + r] = from[r * from_stride + c0];
    }
  }
  for (; r0 < rows; ++r0) {
    for (std::int64_t c = 0; c < columns; ++c) to[c * to_stride + r0] = from[r0 * from_stride + c];
  }
}

}  // namespace kiln::cpu
