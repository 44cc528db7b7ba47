// core/cuda/loops.cuh — what every Kiln CUDA kernel shares: the device type behind each
// DType, conversions between them, the per-dtype dispatch, grid sizing, and the offset
// arithmetic of Elementwise (core/cuda/launch.h). Included only by .cu files.
// Read next: core/cuda/elementwise.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/launch.h"
#include "core/dtype_sets.h"

namespace kiln::cuda {

// ---------------------------------------------------------------------------------------
// Types

/// Half types compute in float (as on the CPU: OpMath); everything else in itself.
template <class T> struct device_op_math { using type = T; };
template <> struct device_op_math<__half> { using type = float; };
template <> struct device_op_math<__nv_bfloat16> { using type = float; };
template <class T> using DeviceOpMath = typename device_op_math<T>::type;

/// Reductions accumulate in float (half types, float), double, or int64 (integers, bool).
template <class T> struct device_acc { using type = std::int64_t; };
template <> struct device_acc<float> { using type = float; };
template <> struct device_acc<double> { using type = double; };
template <> struct device_acc<__half> { using type = float; };
template <> struct device_acc<__nv_bfloat16> { using type = float; };
template <class T> using DeviceAcc = typename device_acc<T>::type;

template <class T>
inline constexpr bool is_half_type = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// Any scalar type to any other: half types through float, bool as != 0 (Kiln's convert<>).
template <class To, class From>
__host__ __device__ inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_type<From>) {
    return convert<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <class T>
__device__ inline bool device_is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// ---------------------------------------------------------------------------------------
// Dispatch: calls f.template operator()<T>() with T the device type of `dtype`, if T is in
// the family.

template <class... Ts> struct Types {};

/// The device type of a dtype: the CPU's C++ type (cpp_type_t) but for CUDA's own half types.
template <DType D> struct device_type_of { using type = cpp_type_t<D>; };
template <> struct device_type_of<DType::Float16> { using type = __half; };
template <> struct device_type_of<DType::BFloat16> { using type = __nv_bfloat16; };

/// A set of dtypes (core/dtype_sets.h) as CUDA's device types.
template <class Set> struct cuda_types_of;
template <DType... Ds> struct cuda_types_of<DTypeSet<Ds...>> { using type = Types<typename device_type_of<Ds>::type...>; };
template <class Set> using CudaTypes = typename cuda_types_of<Set>::type;

using FloatTypes = CudaTypes<FloatingDTypes>;
using NumericTypes = CudaTypes<NumericDTypes>;
using AllTypes = CudaTypes<AllDTypes>;

template <class T, class List> struct listed;
template <class T, class... Ts> struct listed<T, Types<Ts...>> : std::bool_constant<(std::is_same_v<T, Ts> || ...)> {};

template <class List, class T, class F>
bool call_listed(F& f) {
  if constexpr (listed<T, List>::value) {
    f.template operator()<T>();
    return true;
  } else {
    return false;
  }
}

/// Returns false (launching nothing) for a dtype outside the family; the launchers pass that
/// up and register.cpp raises "not implemented for '<dtype>'".
template <class List, class F>
bool dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32: return call_listed<List, float>(f);
    case DType::Float64: return call_listed<List, double>(f);
    case DType::Float16: return call_listed<List, __half>(f);
    case DType::BFloat16: return call_listed<List, __nv_bfloat16>(f);
    case DType::Int64: return call_listed<List, std::int64_t>(f);
    case DType::Int32: return call_listed<List, std::int32_t>(f);
    case DType::Int16: return call_listed<List, std::int16_t>(f);
    case DType::Int8: return call_listed<List, std::int8_t>(f);
    case DType::UInt8: return call_listed<List, std::uint8_t>(f);
    case DType::Bool: return call_listed<List, bool>(f);
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// Launch configuration

inline constexpr int kBlockSize = 256;

/// Blocks for a grid-stride loop over n elements: enough to fill the device, capped so huge
/// tensors loop instead of launching millions of blocks.
inline unsigned int blocks_for(std::int64_t n) {
  const std::int64_t blocks = (n + kBlockSize - 1) / kBlockSize;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}

inline cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }

/// Raises a Kiln error for the last launch's status (defined in runtime.cpp).
void check_launch(const char* kernel);

/// Offsets (in elements) of operand k for linear index i of an Elementwise iteration.
template <int N>
__device__ inline void offsets_of(const Elementwise<N>& a, std::int64_t i, std::int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (a.contiguous) {
    for (int k = 0; k < N; ++k) off[k] = i;
    return;
  }
  for (int d = a.dims - 1; d >= 0; --d) {
    const std::int64_t size = a.sizes[d];
    const std::int64_t coord = i % size;
    i /= size;
    for (int k = 0; k < N; ++k) off[k] += coord * a.strides[k][d];
  }
}

/// Runs f(offsets) for every element of an Elementwise iteration, grid-stride.
template <int N, class F>
__global__ void elementwise_kernel(Elementwise<N> a, F f) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += stride) {
    std::int64_t off[N];
    offsets_of(a, i, off);
    f(a, off);
  }
}

template <int N, class F>
void launch_elementwise(const Elementwise<N>& a, F f, StreamHandle stream, const char* name) {
  if (a.numel == 0) return;
  elementwise_kernel<N><<<blocks_for(a.numel), kBlockSize, 0, as_stream(stream)>>>(a, f);
  check_launch(name);
}

template <class T>
__device__ inline T& at(char* base, std::int64_t offset) {
  return reinterpret_cast<T*>(base)[offset];
}
template <class T>
__device__ inline const T& at(const char* base, std::int64_t offset) {
  return reinterpret_cast<const T*>(base)[offset];
}

}  // namespace kiln::cuda
