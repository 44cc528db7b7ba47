// core/dispatch.h — picking the C++ type for a runtime dtype, once per kernel call:
//
//   dispatch_dtype<FloatingTypes>(x.dtype(), "exp_cpu", [&]<typename T>() {
//     ... T is float, double, Eigen::half or Eigen::bfloat16 here ...
//   });
//
// One C++20 templated lambda and one hand-written switch replace every dispatch macro. A
// dtype outside the list throws NotImplementedError: "exp_cpu" not implemented for 'Long'.
// Read next: core/kernels.h (the per-op kernel tables), core/cpu/loops.h.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/dtype_sets.h"
#include "core/error.h"
#include "core/half.h"
#include "core/messages.h"

namespace kiln {

template <class... Ts>
struct TypeList {};

template <class List, class T>
struct list_contains;
template <class... Ts, class T>
struct list_contains<TypeList<Ts...>, T> : std::bool_constant<(std::is_same_v<Ts, T> || ...)> {};

template <class List>
struct list_front;
template <class T, class... Ts>
struct list_front<TypeList<T, Ts...>> { using type = T; };

/// A set of dtypes (core/dtype_sets.h) as the CPU's C++ types.
template <class Set>
struct cpu_types_of;
template <DType... Ds>
struct cpu_types_of<DTypeSet<Ds...>> {
  using type = TypeList<cpp_type_t<Ds>...>;
};
template <class Set>
using CpuTypes = typename cpu_types_of<Set>::type;

using FloatingTypes = CpuTypes<FloatingDTypes>;
using IntegralTypes = CpuTypes<IntegralDTypes>;
using NumericTypes = CpuTypes<NumericDTypes>;
using AllTypes = CpuTypes<AllDTypes>;
/// What GEMM and friends run on, on the CPU.
using GemmTypes = FloatingTypes;

namespace detail {
template <class List, class T, class F>
auto call_if_listed(DType t, const char* name, F& f)
    -> decltype(f.template operator()<typename list_front<List>::type>()) {
  if constexpr (list_contains<List, T>::value) {
    return f.template operator()<T>();
  } else {
    detail::throw_error<NotImplementedError>(std::source_location::current(),
                                             msg::not_implemented_for(name, t));
  }
}
}  // namespace detail

template <class List, class F>
auto dispatch_dtype(DType t, const char* name, F&& f)
    -> decltype(f.template operator()<typename list_front<List>::type>()) {
  switch (t) {
    case DType::Float32: return detail::call_if_listed<List, float>(t, name, f);
    case DType::Float64: return detail::call_if_listed<List, double>(t, name, f);
    case DType::Float16: return detail::call_if_listed<List, Eigen::half>(t, name, f);
    case DType::BFloat16: return detail::call_if_listed<List, Eigen::bfloat16>(t, name, f);
    case DType::Int64: return detail::call_if_listed<List, std::int64_t>(t, name, f);
    case DType::Int32: return detail::call_if_listed<List, std::int32_t>(t, name, f);
    case DType::Int16: return detail::call_if_listed<List, std::int16_t>(t, name, f);
    case DType::Int8: return detail::call_if_listed<List, std::int8_t>(t, name, f);
    case DType::UInt8: return detail::call_if_listed<List, std::uint8_t>(t, name, f);
    case DType::Bool: return detail::call_if_listed<List, bool>(t, name, f);
  }
  detail::throw_error<Error>(std::source_location::current(), "unknown dtype");
}

}  // namespace kiln
