// tests/core/test_transpose_tiles.cpp — transpose() from core/cpu/transpose_tiles.h moves every
// element of 1, 2 and 4 bytes to its transposed place, through whole 16 x 16 tiles and the
// edges around them, between strided rows, and leaves what lies between the rows alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/cpu/transpose_tiles.h"
#include "core/half.h"

namespace kiln {
namespace {

template <class T>
void expect_transposed(std::int64_t rows, std::int64_t columns) {
  const std::int64_t from_stride = columns + 3, to_stride = rows + 5;
  std::vector<T> from(static_cast<std::size_t>(rows * from_stride));
  for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<T>(i * 7 + 1);
  const T untouched = static_cast<T>(-1);
  std::vector<T> to(static_cast<std::size_t>(columns * to_stride), untouched);
  cpu::transpose(from.data(), from_stride, rows, columns, to.data(), to_stride);
  for (std::int64_t c = 0; c < columns; ++c) {
    for (std::int64_t r = 0; r < to_stride; ++r) {
      const T want = r < rows ? from[static_cast<std::size_t>(r * from_stride + c)] : untouched;
      ASSERT_EQ(to[static_cast<std::size_t>(c * to_stride + r)], want)
          << sizeof(T) << "-byte elements, " << rows << " x " << columns << ": row " << r << ", column " << c;
    }
  }
}

TEST(TransposeTiles, EveryElementOfEverySizeLandsInItsTransposedPlace) {
  for (const std::int64_t rows : {1, 15, 16, 17, 49, 196}) {
    for (const std::int64_t columns : {1, 16, 32, 33, 49}) {
      expect_transposed<std::uint8_t>(rows, columns);
      expect_transposed<std::uint16_t>(rows, columns);
      expect_transposed<std::uint32_t>(rows, columns);
    }
  }
}

TEST(TransposeTiles, FloatsAndBFloat16MoveAsTheirBits) {
  const std::vector<float> from = {1.5f, -0.0f, 3.25f, 4.0f};
  std::vector<float> to(4);
  cpu::transpose(from.data(), 2, 2, 2, to.data(), 2);
  EXPECT_EQ(to, (std::vector<float>{1.5f, 3.25f, -0.0f, 4.0f}));
  EXPECT_TRUE(std::signbit(to[2]));
  std::vector<Eigen::bfloat16> half_from(16 * 16), half_to(16 * 16);
  for (int i = 0; i < 256; ++i) half_from[static_cast<std::size_t>(i)] = Eigen::bfloat16(static_cast<float>(i));
  cpu::transpose(half_from.data(), 16, 16, 16, half_to.data(), 16);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) EXPECT_EQ(static_cast<float>(half_to[static_cast<std::size_t>(c * 16 + r)]), r * 16 + c);
  }
}

}  // namespace
}  // namespace kiln
