// core/ops/functors.h — the elementwise math, written once for CPU and CUDA. Each functor
// computes in OpMath<T> (float for half types); kernels convert on load and store.
// The enums below name the members of each op family; core/kernels.h holds one kernel per
// member and device, and `static_assert`s in the registration lists catch a member added
// here without a kernel. Each functor names the dtypes it is built for (`using dtypes`, a set
// of core/dtype_sets.h), for the CPU's kernels and CUDA's alike.
// Read next: core/kernels.h, core/cpu/unary.cpp, core/cpu/binary.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda/host_device.h"
#include "core/dtype_sets.h"

namespace kiln {

enum class UnaryOp : std::uint8_t {
  Neg, Exp, Log, Sqrt, Rsqrt, Abs, Sign, Relu, Sigmoid, Tanh, Gelu, Erf, Reciprocal,
  kCount
};

enum class BinaryOp : std::uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, ThresholdBackward, GeluBackward,
  Eq, Ne, Lt, Le, Gt, Ge,
  LogicalAnd, LogicalOr, LogicalXor,
  kCount
};

KILN_HOST_DEVICE inline constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }
KILN_HOST_DEVICE inline constexpr bool is_logical(BinaryOp op) { return op >= BinaryOp::LogicalAnd; }

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);

namespace functors {

template <class T>
KILN_HOST_DEVICE constexpr bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// Note [Integer overflow]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Integer tensors wrap around on overflow, as in PyTorch and NumPy. Signed overflow is
// undefined behaviour in C++, so signed integers are added, subtracted and multiplied as
// their unsigned counterparts (two's complement: the same bits, but defined).
template <class T>
KILN_HOST_DEVICE constexpr T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) >= sizeof(int)) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return static_cast<T>(a + b);
  }
}
template <class T>
KILN_HOST_DEVICE constexpr T wrapping_sub(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) >= sizeof(int)) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return static_cast<T>(a - b);
  }
}
template <class T>
KILN_HOST_DEVICE constexpr T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) >= sizeof(int)) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return static_cast<T>(a * b);
  }
}

struct Neg {
  using dtypes = NumericDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return wrapping_sub(T(0), a); }
};
struct Exp {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return std::exp(a); }
};
struct Log {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return std::log(a); }
};
struct Sqrt {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return std::sqrt(a); }
};
struct Rsqrt {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return T(1) / std::sqrt(a); }
};
struct Abs {
  using dtypes = NumericDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const {
    if constexpr (std::is_unsigned_v<T>) return a;
    else return a < T(0) ? wrapping_sub(T(0), a) : a;
  }
};
struct Sign {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_unsigned_v<T>) return static_cast<T>(a != T(0));
    else return static_cast<T>((T(0) < a) - (a < T(0)));
  }
};
/// max(a, 0) that lets NaN through, as PyTorch's relu does.
struct Relu {
  using dtypes = NumericDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const {
    if constexpr (std::is_unsigned_v<T>) return a;
    else return a < T(0) ? T(0) : a;
  }
};
struct Sigmoid {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return T(1) / (T(1) + std::exp(-a)); }
};
struct Tanh {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return std::tanh(a); }
};
/// The exact (erf) GELU: x * Phi(x), PyTorch's default approximate='none'.
struct Gelu {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const {
    return T(0.5) * a * (T(1) + std::erf(a * T(0.70710678118654752440)));
  }
};
struct Erf {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return std::erf(a); }
};
struct Reciprocal {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a) const { return T(1) / a; }
};

struct Add {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const { return wrapping_add(a, b); }
};
struct Sub {
  using dtypes = NumericDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const { return wrapping_sub(a, b); }
};
struct Mul {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const { return wrapping_mul(a, b); }
};
struct Div {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const { return static_cast<T>(a / b); }
};
struct Pow {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      // Integer power by squaring; negative exponents are rejected by the op front-end.
      T result = 1;
      T base = a;
      for (T e = b; e > 0; e = static_cast<T>(e >> 1)) {
        if (e & 1) result = wrapping_mul(result, base);
        base = wrapping_mul(base, base);
      }
      return result;
    }
  }
};
/// NaN-propagating maximum/minimum (torch.maximum semantics).
struct Maximum {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return a > b ? a : b;
  }
};
struct Minimum {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return a < b ? a : b;
  }
};
/// PyTorch's threshold_backward at 0, relu's backward in one pass: the gradient `a` where the
/// output `b` is positive (or NaN), else 0. A zero mask times an inf gradient would give NaN.
struct ThresholdBackward {
  using dtypes = NumericDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const { return b <= T(0) ? T(0) : a; }
};
/// PyTorch's gelu_backward (approximate='none') in one pass: the gradient `a` times
/// gelu'(b) = Phi(b) + b phi(b). Written as ops, the same formula is ten passes and temporaries.
struct GeluBackward {
  using dtypes = FloatingDTypes;
  template <class T> KILN_HOST_DEVICE T operator()(T a, T b) const {
    const T cdf = T(0.5) * (T(1) + std::erf(b * T(0.70710678118654752440)));
    const T pdf = std::exp(T(-0.5) * b * b) * T(0.39894228040143267794);
    return a * (cdf + b * pdf);
  }
};
struct Eq {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  using dtypes = AllDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; }
};
struct LogicalAnd {
  using dtypes = BoolDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a && b; }
};
struct LogicalOr {
  using dtypes = BoolDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a || b; }
};
struct LogicalXor {
  using dtypes = BoolDTypes;
  template <class T> KILN_HOST_DEVICE bool operator()(T a, T b) const { return a != b; }
};

}  // namespace functors
}  // namespace kiln
