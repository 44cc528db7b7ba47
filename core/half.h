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

/// Converts between any two Kiln scalar types (half types go through float; bool is != 0).
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_arithmetic_v<To> && std::is_arithmetic_v<From>) {
    return static_cast<To>(v);
  } else {
    return static_cast<To>(static_cast<float>(v));
  }
}

}  // namespace kiln
