// core/half.h — the 16-bit float types (Eigen::half, Eigen::bfloat16) made complete, and the
// types kernels compute and accumulate in. Half types are storage formats: arithmetic on them
// runs in float (OpMath) and reductions accumulate in a wider type (AccType), as in PyTorch.
// Only kernels and conversions include this (Eigen/Core costs ~1 s of compile time per file).
// Read next: core/dispatch.h.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace kiln {

template <class T> struct op_math { using type = T; };
template <> struct op_math<Eigen::half> { using type = float; };
template <> struct op_math<Eigen::bfloat16> { using type = float; };
/// The type elementwise math on T runs in: float for half types, T otherwise.
template <class T> using OpMath = typename op_math<T>::type;

template <class T> struct acc_type { using type = std::int64_t; };  // integers and bool
template <> struct acc_type<float> { using type = double; };
template <> struct acc_type<double> { using type = double; };
template <> struct acc_type<Eigen::half> { using type = float; };
template <> struct acc_type<Eigen::bfloat16> { using type = float; };
/// The type a serial reduction over T (a product) accumulates in. Floating sums have their
/// own two tiers (Note [How Kiln sums] in core/cpu/cascade_sum.h).
template <class T> using AccType = typename acc_type<T>::type;

// Note [Rounding to BFloat16 in vector loops]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Eigen::bfloat16(float) rounds to nearest even, and turns a NaN into the quiet NaN of its
// sign, but behind a branch on isnan that keeps the compiler from vectorising any loop that
// stores BFloat16 (measured: relu and its backward in BFloat16 ran 3-5x slower than in
// Float32, at twice the bytes). The same rounding written on the bits, with the NaN case a
// select, vectorises; these two are what hot kernels use to go from a half type to the type
// they compute in and back.

/// Eigen::bfloat16(f), bit for bit, in a form loops vectorise.
inline Eigen::bfloat16 round_to_bfloat16(float f) {
  const auto u = Eigen::numext::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  return Eigen::numext::bit_cast<Eigen::bfloat16>(static_cast<std::uint16_t>(is_nan ? quiet_nan : rounded));
}

/// v in the type math on T runs in (OpMath<T>).
template <class T>
inline OpMath<T> to_op_math(T v) {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    return Eigen::numext::bit_cast<float>(static_cast<std::uint32_t>(Eigen::numext::bit_cast<std::uint16_t>(v)) << 16);
  } else {
    return static_cast<OpMath<T>>(v);
  }
}

/// A result of math on T's OpMath stored back as T (rounded once, for half types).
template <class T>
inline T from_op_math(OpMath<T> v) {
  if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    return round_to_bfloat16(v);
  } else {
    return static_cast<T>(v);
  }
}

/// Converts between any two Kiln scalar types (half types go through float; bool is != 0).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_arithmetic_v<To> && std::is_arithmetic_v<From>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_same_v<From, Eigen::bfloat16>) {
    // Eigen's own widening writes half a float through a pointer, which no loop vectorised:
    // a BFloat16 -> Float32 copy ran at a third of the opposite direction's speed.
    return static_cast<To>(to_op_math(v));
  } else if constexpr (std::is_same_v<To, Eigen::bfloat16>) {
    return round_to_bfloat16(static_cast<float>(v));  // Note [Rounding to BFloat16 in vector loops]
  } else {
    return static_cast<To>(static_cast<float>(v));
  }
}

}  // namespace kiln
