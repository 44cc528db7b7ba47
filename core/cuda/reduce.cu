// core/cuda/reduce.cu — sum, prod, amax, amin over any set of dims, and argmax/argmin
// along one dim, on the GPU. A reduction of many elements per output gives each output a
// block (threads stride over the reduced elements, then a shared-memory tree), or several
// blocks and a second pass when there are few outputs (Note [Reductions of few outputs over
// many elements] in core/cuda/launch.h); a reduction of few elements per output gives each
// output a thread. Accumulation is in float for half
// types and float, double for double, int64 for integers; amax/amin let NaN win (PyTorch's
// rule). A floating sum keeps a compensated (Kahan) sum in each thread, so a thread's long
// strided walk adds no error that grows with its length, and the tree adds log2(block)
// roundings (Note [How Kiln sums] in core/cpu/cascade_sum.h).
// Read next: core/cuda/index.cu.
#include "core/cuda/loops.cuh"
#include "core/kernel_params.h"

namespace kiln::cuda {

namespace {

template <class A>
struct SumOp {
  __device__ static A identity() { return A(0); }
  __device__ static A combine(A a, A b) { return a + b; }
};
template <class A>
struct ProdOp {
  __device__ static A identity() { return A(1); }
  __device__ static A combine(A a, A b) { return a * b; }
};
template <class A>
struct MaxOp {
  __device__ static A identity() {
    if constexpr (std::is_floating_point_v<A>) return -INFINITY;
    else if constexpr (std::is_same_v<A, bool>) return false;
    else return std::numeric_limits<A>::lowest();
  }
  __device__ static A combine(A a, A b) {
    if (device_is_nan(a)) return a;
    if (device_is_nan(b)) return b;
    return a > b ? a : b;
  }
};
template <class A>
struct MinOp {
  __device__ static A identity() {
    if constexpr (std::is_floating_point_v<A>) return INFINITY;
    else if constexpr (std::is_same_v<A, bool>) return true;
    else return std::numeric_limits<A>::max();
  }
  __device__ static A combine(A a, A b) {
    if (device_is_nan(a)) return a;
    if (device_is_nan(b)) return b;
    return a < b ? a : b;
  }
};

/// What a thread carries while it walks its elements: a running value for every op, and
/// for floating sums the compensation that holds the low-order bits each addition dropped:
///   y = v - c;  t = sum + y;  c = (t - sum) - y;  sum = t
/// (Kahan). There is no multiplication for the compiler to contract into an FMA.
template <class A, class Op>
struct ThreadAccumulator {
  static constexpr bool kCompensated = std::is_same_v<Op, SumOp<A>> && std::is_floating_point_v<A>;
  A value = Op::identity();
  A compensation = A(0);
  __device__ void add(A v) {
    if constexpr (kCompensated) {
      const A y = v - compensation;
      const A t = value + y;
      compensation = (t - value) - y;
      value = t;
    } else {
      value = Op::combine(value, v);
    }
  }
};

// The outermost dim needs no remainder: its coordinate is what the others leave.
__device__ inline std::int64_t outer_offset(const Reduction& r, std::int64_t o, bool in) {
  if (r.outer_dims == 0) return 0;
  const std::int64_t* strides = in ? r.outer_in_strides : r.outer_out_strides;
  std::int64_t off = 0;
  for (int d = r.outer_dims - 1; d > 0; --d) {
    off += (o % r.outer_sizes[d]) * strides[d];
    o /= r.outer_sizes[d];
  }
  return off + o * strides[0];
}

__device__ inline std::int64_t inner_offset(const Reduction& r, std::int64_t j) {
  if (r.inner_dims == 0) return 0;
  std::int64_t off = 0;
  for (int d = r.inner_dims - 1; d > 0; --d) {
    off += (j % r.inner_sizes[d]) * r.inner_strides[d];
    j /= r.inner_sizes[d];
  }
  return off + j * r.inner_strides[0];
}

/// The value written for an output: a floating sum divided by r.divisor (in double, so the
/// division itself adds no rounding before the conversion to T), anything else as it is.
template <class T, class A>
__device__ T result(A value, const Reduction& r) {
  if constexpr (std::is_floating_point_v<A>) {
    if (r.divisor != 1) return convert<T>(static_cast<double>(value) / r.divisor);
  }
  return convert<T>(value);
}

/// One thread per output.
template <class T, class A, class Op>
__global__ void reduce_thread_per_output(Reduction r) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t o = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < r.outputs; o += stride) {
    const T* in = reinterpret_cast<const T*>(r.in) + outer_offset(r, o, true);
    ThreadAccumulator<A, Op> acc;
    for (std::int64_t j = 0; j < r.inner; ++j) acc.add(convert<A>(in[inner_offset(r, j)]));
    reinterpret_cast<T*>(r.out)[outer_offset(r, o, false)] = result<T>(acc.value, r);
  }
}

/// Combines the block's per-thread values in a tree in shared memory with `combine`; every
/// thread gets the result.
template <class A, class Combine>
__device__ A block_combine(A value, A* shared, Combine combine) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  const A result = shared[0];
  __syncthreads();  // before the next output's values overwrite shared
  return result;
}

/// Block b is part b % parts of output b / parts and walks that output's elements in tiles of
/// blockDim, every parts-th tile its own (strided partial results, compensated for sums, then a
/// tree). With one part it writes the output; with more it writes its partial for the second
/// pass (Note [Reductions of few outputs over many elements]).
template <class T, class A, class Op>
__global__ void reduce_blocks(Reduction r) {
  __shared__ A shared[kBlockSize];
  const std::int64_t blocks = r.outputs * r.parts, tile = blockDim.x;
  for (std::int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const std::int64_t o = b / r.parts, part = b % r.parts;
    const T* in = reinterpret_cast<const T*>(r.in) + outer_offset(r, o, true);
    ThreadAccumulator<A, Op> acc;
    for (std::int64_t j = part * tile + threadIdx.x; j < r.inner; j += r.parts * tile) {
      acc.add(convert<A>(in[inner_offset(r, j)]));
    }
    const A value = block_combine(acc.value, shared, [](A a, A b) { return Op::combine(a, b); });
    if (threadIdx.x != 0) continue;
    if (r.parts == 1) reinterpret_cast<T*>(r.out)[outer_offset(r, o, false)] = result<T>(value, r);
    else static_cast<A*>(r.partials)[b] = value;
  }
}

/// The second pass: one block per output combines its parts in order.
template <class T, class A, class Op>
__global__ void reduce_partials(Reduction r) {
  __shared__ A shared[kBlockSize];
  for (std::int64_t o = blockIdx.x; o < r.outputs; o += gridDim.x) {
    const A* parts = static_cast<const A*>(r.partials) + o * r.parts;
    ThreadAccumulator<A, Op> acc;
    for (std::int64_t j = threadIdx.x; j < r.parts; j += blockDim.x) acc.add(parts[j]);
    const A value = block_combine(acc.value, shared, [](A a, A b) { return Op::combine(a, b); });
    if (threadIdx.x == 0) reinterpret_cast<T*>(r.out)[outer_offset(r, o, false)] = result<T>(value, r);
  }
}

template <class T, class A, class Op>
void run_reduction(const Reduction& r, StreamHandle stream) {
  if (r.outputs == 0) return;
  if (r.inner < 64) {
    reduce_thread_per_output<T, A, Op><<<blocks_for(r.outputs), kBlockSize, 0, as_stream(stream)>>>(r);
  } else {
    static_assert(sizeof(A) <= 8, "Reduction::partials holds 8 bytes per part");
    const std::int64_t blocks = r.outputs * r.parts;  // parts > 1: at most kReducePartials
    reduce_blocks<T, A, Op><<<static_cast<unsigned int>(blocks < 65536 ? blocks : 65536), kBlockSize, 0,
                              as_stream(stream)>>>(r);
    if (r.parts > 1) {
      reduce_partials<T, A, Op><<<static_cast<unsigned int>(r.outputs), kBlockSize, 0, as_stream(stream)>>>(r);
    }
  }
  check_launch("reduce_cuda");
}

}  // namespace

bool launch_reduce(ReduceOp op, DType dtype, const Reduction& r, StreamHandle stream) {
  return dispatch<AllTypes>(dtype, [&]<typename T>() {
    using A = DeviceAcc<T>;
    switch (op) {
      case ReduceOp::Sum: return run_reduction<T, A, SumOp<A>>(r, stream);
      case ReduceOp::Prod: return run_reduction<T, A, ProdOp<A>>(r, stream);
      // Extremes are exact in the element type's own math type.
      case ReduceOp::Amax: return run_reduction<T, DeviceOpMath<T>, MaxOp<DeviceOpMath<T>>>(r, stream);
      case ReduceOp::Amin: return run_reduction<T, DeviceOpMath<T>, MinOp<DeviceOpMath<T>>>(r, stream);
      case ReduceOp::kCount: break;
    }
  });
}

namespace {

/// One thread per (outer, inner) position walks the reduced dim: the first extreme wins,
/// and the first NaN wins for good.
template <class T>
__global__ void arg_reduce_kernel(T* values, std::int64_t* indices, const T* in, std::int64_t outer, std::int64_t size,
                                  std::int64_t inner, bool is_max) {
  using M = DeviceOpMath<T>;
  const std::int64_t n = outer * inner;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t p = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < n; p += stride) {
    const std::int64_t o = p / inner, i = p % inner;
    const T* line = in + o * size * inner + i;
    M best = convert<M>(line[0]);
    std::int64_t best_at = 0;
    for (std::int64_t k = 1; k < size && !device_is_nan(best); ++k) {
      const M v = convert<M>(line[k * inner]);
      if (device_is_nan(v) || (is_max ? v > best : v < best)) {
        best = v;
        best_at = k;
      }
    }
    values[p] = convert<T>(best);
    indices[p] = best_at;
  }
}

/// A thread's or a block's candidate: the extreme so far and where it was.
template <class M>
struct ArgBest {
  M value;
  std::int64_t at;
};

/// The better of two candidates by the thread kernel's rule: a NaN beats any number, else the
/// greater (argmax) or smaller value, and of two equals or two NaNs the earlier one.
template <class M>
__device__ ArgBest<M> better(const ArgBest<M>& a, const ArgBest<M>& b, bool is_max) {
  const bool a_nan = device_is_nan(a.value), b_nan = device_is_nan(b.value);
  if (a_nan || b_nan) {
    if (a_nan && b_nan) return a.at <= b.at ? a : b;
    return a_nan ? a : b;
  }
  if (is_max ? a.value > b.value : a.value < b.value) return a;
  if (is_max ? b.value > a.value : b.value < a.value) return b;
  return a.at <= b.at ? a : b;
}

/// One block per (outer, inner) position, for few positions along a long dim (a whole
/// tensor's argmax walked by one thread took as long as the tensor is long): each thread walks
/// every blockDim-th element, stopping at its first NaN, then a tree keeps the better half.
template <class T>
__global__ void arg_reduce_block_kernel(T* values, std::int64_t* indices, const T* in, std::int64_t outer,
                                        std::int64_t size, std::int64_t inner, bool is_max) {
  using M = DeviceOpMath<T>;
  __shared__ ArgBest<M> shared[kBlockSize];
  const auto keep_better = [is_max](const ArgBest<M>& a, const ArgBest<M>& b) { return better(a, b, is_max); };
  for (std::int64_t p = blockIdx.x; p < outer * inner; p += gridDim.x) {
    const std::int64_t o = p / inner, i = p % inner;
    const T* line = in + o * size * inner + i;
    // The launcher gives this kernel only dims of at least 4 * blockDim elements.
    ArgBest<M> best{convert<M>(line[threadIdx.x * inner]), threadIdx.x};
    for (std::int64_t k = threadIdx.x + blockDim.x; k < size && !device_is_nan(best.value); k += blockDim.x) {
      best = better(best, ArgBest<M>{convert<M>(line[k * inner]), k}, is_max);
    }
    const ArgBest<M> kept = block_combine(best, shared, keep_better);
    if (threadIdx.x == 0) {
      values[p] = convert<T>(kept.value);
      indices[p] = kept.at;
    }
  }
}

}  // namespace

bool launch_arg_reduce(DType dtype, char* values, std::int64_t* indices, const char* in, std::int64_t outer,
                       std::int64_t size, std::int64_t inner, bool is_max, StreamHandle stream) {
  if (outer * inner == 0 || size == 0) return true;
  return dispatch<NumericTypes>(dtype, [&]<typename T>() {
    // A block per position when there are few positions along a long dim, or when the dim is
    // the innermost one (a thread per position would read a row each, none of them coalesced).
    const std::int64_t positions = outer * inner;
    if (size >= 4 * kBlockSize && (inner == 1 || positions < 2048)) {
      const auto blocks = static_cast<unsigned int>(positions < 65536 ? positions : 65536);
      arg_reduce_block_kernel<T><<<blocks, kBlockSize, 0, as_stream(stream)>>>(
          reinterpret_cast<T*>(values), indices, reinterpret_cast<const T*>(in), outer, size, inner, is_max);
    } else {
      arg_reduce_kernel<T><<<blocks_for(positions), kBlockSize, 0, as_stream(stream)>>>(
          reinterpret_cast<T*>(values), indices, reinterpret_cast<const T*>(in), outer, size, inner, is_max);
    }
    check_launch("arg_reduce_cuda");
  });
}

}  // namespace kiln::cuda
