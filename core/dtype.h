// core/dtype.h — the ten scalar types a Kiln tensor can hold: their sizes, names, the C++
// types behind them, and PyTorch's promotion lattice (`promote_types`).
// Half types are Eigen::half / Eigen::bfloat16; they are only forward-declared here so that
// headers stay light. Include core/half.h where you need them complete.
// Read next: core/scalar.h (values), core/dispatch.h (picking a kernel per dtype).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <type_traits>

namespace Eigen {
struct half;
struct bfloat16;
}  // namespace Eigen

namespace kiln {

/// The element type of a tensor. Order matters: it indexes tables below.
enum class DType : std::int8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
};
inline constexpr int kNumDTypes = 10;

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kInt16 = DType::Int16;
inline constexpr DType kShort = DType::Int16;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kByte = DType::UInt8;
inline constexpr DType kBool = DType::Bool;

/// Bytes per element.
constexpr std::size_t itemsize(DType t) {
  constexpr std::size_t sizes[kNumDTypes] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};
  return sizes[static_cast<int>(t)];
}

constexpr bool is_floating_point(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 ||
         t == DType::BFloat16;
}

/// Integral types; Bool counts only when asked, as in PyTorch's isIntegralType.
constexpr bool is_integral(DType t, bool include_bool) {
  return (!is_floating_point(t) && t != DType::Bool) || (include_bool && t == DType::Bool);
}

constexpr bool is_reduced_floating_point(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}

/// "float32", "int64", ... (the name after `kiln.` when printed).
const char* dtype_name(DType t);

/// PyTorch's ScalarType names used in its error texts: "Float", "Double", "Half", "Long"...
/// e.g. "expected scalar type Float but found Double".
const char* scalar_type_name(DType t);

/// Prints "kiln.float32".
std::ostream& operator<<(std::ostream& os, DType t);

/// The smallest type both `a` and `b` convert to without losing their category
/// (bool < integral < floating). See Note [Type promotion] in core/type_promotion.h.
DType promote_types(DType a, DType b);

/// Default dtype for floating values created from C++ literals (Float32 unless changed).
DType default_dtype();
void set_default_dtype(DType t);

// --- C++ type <-> DType --------------------------------------------------------------

template <class T>
struct dtype_of;  // undefined for unsupported types: a compile error names the type
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<Eigen::half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<Eigen::bfloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<std::int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<std::int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<std::uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };

template <class T>
inline constexpr DType dtype_v = dtype_of<std::remove_cv_t<T>>::value;

template <class T>
concept KilnScalar = requires { dtype_of<std::remove_cv_t<T>>::value; };

template <DType D> struct cpp_type_of;
template <> struct cpp_type_of<DType::Float32> { using type = float; };
template <> struct cpp_type_of<DType::Float64> { using type = double; };
template <> struct cpp_type_of<DType::Float16> { using type = Eigen::half; };
template <> struct cpp_type_of<DType::BFloat16> { using type = Eigen::bfloat16; };
template <> struct cpp_type_of<DType::Int64> { using type = std::int64_t; };
template <> struct cpp_type_of<DType::Int32> { using type = std::int32_t; };
template <> struct cpp_type_of<DType::Int16> { using type = std::int16_t; };
template <> struct cpp_type_of<DType::Int8> { using type = std::int8_t; };
template <> struct cpp_type_of<DType::UInt8> { using type = std::uint8_t; };
template <> struct cpp_type_of<DType::Bool> { using type = bool; };

template <DType D>
using cpp_type_t = typename cpp_type_of<D>::type;

}  // namespace kiln
