// tests/core/test_block_lanes.cpp — any_lane_set from core/cpu/block_lanes.h finds a nonzero
// lane wherever it is, in vectors of every width it is used at (one test instruction for 32 and
// 64 bytes where the target has it, halves ORed together otherwise), and finds none in zeros.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/cpu/block_lanes.h"

namespace kiln {
namespace {

template <class E, int B>
void expect_every_lane_found() {
  using V = typename cpu::VectorOf<E, B>::type;
  const V zeros = {};
  EXPECT_FALSE(cpu::any_lane_set(zeros)) << B << " lanes of " << sizeof(E) << " bytes";
  for (int lane = 0; lane < B; ++lane) {
    for (const E value : {E(1), static_cast<E>(E(1) << (8 * sizeof(E) - 1))}) {  // lowest bit, highest bit
      V v = zeros;
      v[lane] = value;
      EXPECT_TRUE(cpu::any_lane_set(v)) << "lane " << lane << " of " << B << ", " << sizeof(E) << "-byte lanes";
    }
  }
}

TEST(AnyLaneSet, FindsANonzeroLaneAnywhereInEveryWidth) {
  expect_every_lane_found<std::uint32_t, 16>();  // 64 bytes: Float32 bits in AVX-512
  expect_every_lane_found<std::uint64_t, 8>();   // 64 bytes: Float64 bits
  expect_every_lane_found<std::uint32_t, 8>();   // 32 bytes
  expect_every_lane_found<std::uint16_t, 16>();  // 32 bytes of half-precision bits
  expect_every_lane_found<std::uint32_t, 4>();   // 16 bytes: folded in halves
  expect_every_lane_found<std::uint32_t, 2>();   // 8 bytes: one integer
  expect_every_lane_found<std::uint8_t, 4>();    // 4 bytes
}

TEST(AnyLaneSet, TellsWhetherTwoVectorsDifferThroughTheirXor) {
  using V = cpu::VectorOf<std::uint32_t, 16>::type;
  V a = {}, b = {};
  for (int lane = 0; lane < 16; ++lane) a[lane] = b[lane] = 0xff800000u;  // -inf's bits
  EXPECT_FALSE(cpu::any_lane_set(a ^ b));
  b[15] = 0;
  EXPECT_TRUE(cpu::any_lane_set(a ^ b));
}

}  // namespace
}  // namespace kiln
