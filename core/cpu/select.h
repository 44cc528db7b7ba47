// core/cpu/select.h — `take ? a : b` without a branch, for kernels whose condition is data:
// whether an activation is positive, whether an element beats a running maximum. On real data
// that is a coin flip, a branch mispredicts about half the time, and compilers emit one for a
// plain conditional on floats (it made max-pool 20x slower than a memcpy of its input, and
// where() on a random mask 7x slower than a multiply).
// Read next: core/cpu/pool.cpp, core/cpu/binary.cpp (where).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace kiln::cpu {

template <class M>
M select(bool take, M a, M b) {
  constexpr std::size_t n = sizeof(M);
  if constexpr (std::is_trivially_copyable_v<M> && (n == 1 || n == 2 || n == 4 || n == 8)) {
    using Bits = std::conditional_t<n == 8, std::uint64_t,
                                    std::conditional_t<n == 4, std::uint32_t,
                                                       std::conditional_t<n == 2, std::uint16_t, std::uint8_t>>>;
    const Bits mask = static_cast<Bits>(-static_cast<Bits>(take));
    return std::bit_cast<M>(static_cast<Bits>((std::bit_cast<Bits>(a) & mask) | (std::bit_cast<Bits>(b) & ~mask)));
  } else {
    return take ? a : b;
  }
}

}  // namespace kiln::cpu
