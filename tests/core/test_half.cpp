// tests/core/test_half.cpp — the conversions hot kernels use between BFloat16 and float
// (core/half.h, Note [Rounding to BFloat16 in vector loops]) give Eigen's results bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "core/half.h"

namespace kiln {
namespace {

std::uint16_t bits(Eigen::bfloat16 v) { return Eigen::numext::bit_cast<std::uint16_t>(v); }
float float_of(std::uint32_t u) { return Eigen::numext::bit_cast<float>(u); }

TEST(RoundToBFloat16, MatchesEigenOnTheEdgeCases) {
  const std::vector<std::uint32_t> cases = {
      0x00000000u, 0x80000000u,              // ±0
      0x7f800000u, 0xff800000u,              // ±inf
      0x7fc00000u, 0xffc00000u,              // quiet NaNs
      0x7f800001u, 0xff800001u,              // signalling NaNs, the smallest payload
      0x7fffffffu, 0x7fa12345u,              // NaN payloads that rounding would carry into inf
      0x00000001u, 0x807fffffu, 0x00008000u,  // subnormals, one a tie
      0x3f808000u, 0x3f818000u,              // ties to even: down, then up
      0x3f807fffu, 0x3f808001u,              // just below and above a tie
      0x7f7fffffu, 0xff7fffffu,              // the largest floats round to ±inf
      0x7f7f7fffu,                           // the largest that stays finite
  };
  for (const std::uint32_t u : cases) {
    const float f = float_of(u);
    EXPECT_EQ(bits(round_to_bfloat16(f)), bits(Eigen::bfloat16(f))) << std::hex << "float bits 0x" << u;
  }
}

TEST(RoundToBFloat16, MatchesEigenAcrossEveryExponentAndSign) {
  // u = k * (2^16 + 1): the low 16 bits, which rounding reads, take every value once, while
  // the high 16 (sign, exponent, kept mantissa) sweep every value too.
  constexpr std::uint64_t kStride = 65'537;
  std::int64_t checked = 0;
  for (std::uint64_t u = 0; u <= std::numeric_limits<std::uint32_t>::max(); u += kStride) {
    const float f = float_of(static_cast<std::uint32_t>(u));
    ASSERT_EQ(bits(round_to_bfloat16(f)), bits(Eigen::bfloat16(f))) << std::hex << "float bits 0x" << u;
    ++checked;
  }
  EXPECT_EQ(checked, 65'536);
}

TEST(ToOpMath, WidensEveryBFloat16Exactly) {
  for (std::uint32_t b = 0; b <= 0xffffu; ++b) {
    const auto v = Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<std::uint16_t>(b));
    const float wide = to_op_math(v);
    ASSERT_EQ(Eigen::numext::bit_cast<std::uint32_t>(wide), Eigen::numext::bit_cast<std::uint32_t>(static_cast<float>(v)))
        << std::hex << "bfloat16 bits 0x" << b;
    // Back to BFloat16: every value but a signalling or payload-carrying NaN comes back unchanged.
    if (!(wide != wide)) {
      EXPECT_EQ(bits(from_op_math<Eigen::bfloat16>(wide)), b);
    }
  }
}

}  // namespace
}  // namespace kiln
