// core/scalar.h — a single number of unknown C++ type: what `full(…, 2.5)`, `x + 1`,
// `fill_(0)` and `item()` exchange with the tensor world. A Scalar remembers whether it was
// floating, integral or bool, because PyTorch's type promotion depends on the category of a
// Python number (x_int64 + 1.5 is Float32, x_int64 + 1 stays Int64).
// Read next: core/type_promotion.h.
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "core/dtype.h"

namespace kiln {

class Scalar {
 public:
  enum class Kind : std::uint8_t { Floating, Integral, Bool };

  Scalar() : Scalar(std::int64_t{0}) {}
  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v) {  // NOLINT: implicit on purpose, scalars appear in arithmetic
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::Bool;
      i_ = v ? 1 : 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      kind_ = Kind::Floating;
      d_ = static_cast<double>(v);
    } else {
      kind_ = Kind::Integral;
      i_ = static_cast<std::int64_t>(v);
    }
  }

  Kind kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == Kind::Floating; }
  bool is_integral() const { return kind_ == Kind::Integral; }
  bool is_bool() const { return kind_ == Kind::Bool; }

  /// The value converted to T (C++ conversion rules; half types through float).
  template <class T>
  T to() const {
    if (kind_ == Kind::Floating) {
      if constexpr (std::is_same_v<T, bool>) return d_ != 0.0;
      else return static_cast<T>(static_cast<float_bridge_t<T>>(d_));
    }
    if constexpr (std::is_same_v<T, bool>) return i_ != 0;
    else return static_cast<T>(static_cast<float_bridge_t<T>>(i_));
  }
  double to_double() const { return kind_ == Kind::Floating ? d_ : static_cast<double>(i_); }
  std::int64_t to_int() const {
    return kind_ == Kind::Floating ? static_cast<std::int64_t>(d_) : i_;
  }

  /// The dtype PyTorch gives a tensor made from this number alone: default float dtype,
  /// Int64 or Bool.
  DType natural_dtype() const;

  Scalar operator-() const;

 private:
  // Eigen's half types convert from float; every other type converts from double/int64 directly.
  template <class T>
  using float_bridge_t = std::conditional_t<std::is_arithmetic_v<T>, T, float>;

  Kind kind_;
  union {
    double d_;
    std::int64_t i_;
  };
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace kiln
