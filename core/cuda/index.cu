// core/cuda/index.cu — index_select, index_add, gather and scatter on the GPU. Tensors
// arrive contiguous and viewed as [outer, size, inner] around the indexed dim. Index values
// were validated on the host before launch. Accumulating writes (index_add, scatter with
// accumulate) are atomic adds, so their float sums may differ from the CPU's in the last bits
// and from run to run (as PyTorch's do); they take the CPU kernels' dtypes (index_add every
// numeric one, scatter_add Bool too).
// Read next: core/cuda/conv.cu.
#include "core/cuda/loops.cuh"

namespace kiln::cuda {

namespace {

/// A one- or two-byte element has no atomicAdd of its own: compare-and-swap the aligned 4-byte
/// word that holds it, changing only its bytes (the allocator hands out 256-byte-aligned blocks
/// in multiples of 512 bytes, so that word never leaves the allocation). Integers wrap as the
/// CPU kernel's functors::wrapping_add does; Bool's sum is `or`.
template <class T>
__device__ inline void atomic_add_in_word(T* address, T value) {
  static_assert(sizeof(T) < sizeof(unsigned int));
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  auto* word = reinterpret_cast<unsigned int*>(at & ~std::uintptr_t{3});
  const unsigned int shift = static_cast<unsigned int>(at & 3) * 8;
  const unsigned int mask = ((1u << (8 * sizeof(T))) - 1) << shift;
  unsigned int seen = *word, expected;
  do {
    expected = seen;
    const unsigned int old_bits = (expected & mask) >> shift;
    T current;
    memcpy(&current, &old_bits, sizeof(T));
    const T sum = functors::wrapping_add(current, value);
    unsigned int sum_bits = 0;
    memcpy(&sum_bits, &sum, sizeof(T));
    seen = atomicCAS(word, expected, (expected & ~mask) | ((sum_bits << shift) & mask));
  } while (seen != expected);
}

template <class T>
__device__ inline void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, std::int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
  } else if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(int)) {
    atomic_add_in_word(address, value);
  } else {
    atomicAdd(address, value);  // float, double, int32, and __half and __nv_bfloat16 (sm_80 and later)
  }
}

template <class T>
__global__ void index_select_kernel(T* out, const T* in, const std::int64_t* index, std::int64_t outer,
                                    std::int64_t in_size, std::int64_t index_size, std::int64_t inner) {
  const std::int64_t n = outer * index_size * inner;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const std::int64_t i = p % inner, k = (p / inner) % index_size, o = p / (inner * index_size);
    out[p] = in[(o * in_size + index[k]) * inner + i];
  }
}

template <class T>
__global__ void index_add_kernel(T* out, const T* source, const std::int64_t* index, std::int64_t outer,
                                 std::int64_t out_size, std::int64_t index_size, std::int64_t inner) {
  const std::int64_t n = outer * index_size * inner;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const std::int64_t i = p % inner, k = (p / inner) % index_size, o = p / (inner * index_size);
    atomic_add(&out[(o * out_size + index[k]) * inner + i], source[p]);
  }
}

template <class T>
__global__ void gather_kernel(T* out, const T* in, const std::int64_t* index, std::int64_t outer, std::int64_t in_size,
                              std::int64_t index_size, std::int64_t inner) {
  const std::int64_t n = outer * index_size * inner;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const std::int64_t i = p % inner, o = p / (inner * index_size);
    out[p] = in[(o * in_size + index[p]) * inner + i];
  }
}

template <class T, bool Accumulate>
__global__ void scatter_kernel(T* out, const T* src, const std::int64_t* index, std::int64_t outer,
                               std::int64_t out_size, std::int64_t index_size, std::int64_t inner) {
  const std::int64_t n = outer * index_size * inner;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const std::int64_t i = p % inner, o = p / (inner * index_size);
    T* target = &out[(o * out_size + index[p]) * inner + i];
    if constexpr (Accumulate) atomic_add(target, src[p]);
    else *target = src[p];  // duplicates: one write wins, unspecified which (as in PyTorch)
  }
}

}  // namespace

bool launch_index_select(DType dtype, char* out, const char* in, const std::int64_t* index, std::int64_t outer,
                         std::int64_t in_size, std::int64_t index_size, std::int64_t inner, StreamHandle stream) {
  const std::int64_t n = outer * index_size * inner;
  if (n == 0) return true;
  return dispatch<AllTypes>(dtype, [&]<typename T>() {
    index_select_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(out), reinterpret_cast<const T*>(in), index, outer, in_size, index_size, inner);
    check_launch("index_select_cuda");
  });
}

bool launch_index_add(DType dtype, char* out, const char* source, const std::int64_t* index, std::int64_t outer,
                      std::int64_t out_size, std::int64_t index_size, std::int64_t inner, StreamHandle stream) {
  const std::int64_t n = outer * index_size * inner;
  if (n == 0) return true;
  return dispatch<NumericTypes>(dtype, [&]<typename T>() {
    index_add_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(out), reinterpret_cast<const T*>(source), index, outer, out_size, index_size, inner);
    check_launch("index_add_cuda");
  });
}

bool launch_gather(DType dtype, char* out, const char* in, const std::int64_t* index, std::int64_t outer,
                   std::int64_t in_size, std::int64_t index_size, std::int64_t inner, StreamHandle stream) {
  const std::int64_t n = outer * index_size * inner;
  if (n == 0) return true;
  return dispatch<AllTypes>(dtype, [&]<typename T>() {
    gather_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(out), reinterpret_cast<const T*>(in), index, outer, in_size, index_size, inner);
    check_launch("gather_cuda");
  });
}

bool launch_scatter(DType dtype, char* out, const char* src, const std::int64_t* index, std::int64_t outer,
                    std::int64_t out_size, std::int64_t index_size, std::int64_t inner, bool accumulate,
                    StreamHandle stream) {
  const std::int64_t n = outer * index_size * inner;
  if (n == 0) return true;
  bool launched = false;
  if (accumulate) {
    launched = dispatch<AllTypes>(dtype, [&]<typename T>() {
      scatter_kernel<T, true><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
          reinterpret_cast<T*>(out), reinterpret_cast<const T*>(src), index, outer, out_size, index_size, inner);
    });
  } else {
    launched = dispatch<AllTypes>(dtype, [&]<typename T>() {
      scatter_kernel<T, false><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
          reinterpret_cast<T*>(out), reinterpret_cast<const T*>(src), index, outer, out_size, index_size, inner);
    });
  }
  check_launch("scatter_cuda");
  return launched;
}

}  // namespace kiln::cuda
