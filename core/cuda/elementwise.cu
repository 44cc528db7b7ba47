// core/cuda/elementwise.cu — the unary and binary op families, where, copy (with dtype
// conversion), fill and arange on the GPU. One grid-stride strided kernel (loops.cuh) runs
// the same functors as the CPU (core/ops/functors.h); half types compute in float.
// Read next: core/cuda/reduce.cu.
#include "core/cuda/loops.cuh"

namespace kiln::cuda {

namespace {

// Device functors rather than __device__ lambdas: no --extended-lambda, and a name in every
// profiler trace.
template <class F, class T>
struct UnaryFn {
  __device__ void operator()(const Elementwise<2>& a, const std::int64_t (&off)[2]) const {
    using M = DeviceOpMath<T>;
    const M x = convert<M>(at<T>(static_cast<const char*>(a.data[1]), off[1]));
    at<T>(a.data[0], off[0]) = convert<T>(F{}(x));
  }
};

template <BinaryOp Op, class F, class T>
struct BinaryFn {
  __device__ void operator()(const Elementwise<3>& a, const std::int64_t (&off)[3]) const {
    using M = DeviceOpMath<T>;
    const M x = convert<M>(at<T>(static_cast<const char*>(a.data[1]), off[1]));
    const M y = convert<M>(at<T>(static_cast<const char*>(a.data[2]), off[2]));
    if constexpr (is_comparison(Op) || is_logical(Op)) {
      at<bool>(a.data[0], off[0]) = F{}(x, y);
    } else {
      at<T>(a.data[0], off[0]) = convert<T>(F{}(x, y));
    }
  }
};

template <class T>
struct WhereFn {
  __device__ void operator()(const Elementwise<4>& a, const std::int64_t (&off)[4]) const {
    const bool c = at<bool>(static_cast<const char*>(a.data[1]), off[1]);
    at<T>(a.data[0], off[0]) =
        c ? at<T>(static_cast<const char*>(a.data[2]), off[2]) : at<T>(static_cast<const char*>(a.data[3]), off[3]);
  }
};

template <class To, class From>
struct CopyFn {
  __device__ void operator()(const Elementwise<2>& a, const std::int64_t (&off)[2]) const {
    at<To>(a.data[0], off[0]) = convert<To>(at<From>(static_cast<const char*>(a.data[1]), off[1]));
  }
};

template <class T>
struct FillFn {
  T value;
  __device__ void operator()(const Elementwise<1>& a, const std::int64_t (&off)[1]) const { at<T>(a.data[0], off[0]) = value; }
};

template <class F>
bool unary_with(const Elementwise<2>& args, StreamHandle stream, const char* name) {
  return dispatch<CudaTypes<typename F::dtypes>>(args.dtype[0], [&]<typename T>() { launch_elementwise(args, UnaryFn<F, T>{}, stream, name); });
}

template <BinaryOp Op, class F>
bool binary_with(const Elementwise<3>& args, StreamHandle stream, const char* name) {
  return dispatch<CudaTypes<typename F::dtypes>>(args.dtype[1], [&]<typename T>() { launch_elementwise(args, BinaryFn<Op, F, T>{}, stream, name); });
}

}  // namespace

bool launch_unary(UnaryOp op, const Elementwise<2>& args, StreamHandle stream) {
  using namespace functors;
  switch (op) {
    case UnaryOp::Neg: return unary_with<Neg>(args, stream, "neg_cuda");
    case UnaryOp::Exp: return unary_with<Exp>(args, stream, "exp_cuda");
    case UnaryOp::Log: return unary_with<Log>(args, stream, "log_cuda");
    case UnaryOp::Sqrt: return unary_with<Sqrt>(args, stream, "sqrt_cuda");
    case UnaryOp::Rsqrt: return unary_with<Rsqrt>(args, stream, "rsqrt_cuda");
    case UnaryOp::Abs: return unary_with<Abs>(args, stream, "abs_cuda");
    case UnaryOp::Sign: return unary_with<Sign>(args, stream, "sign_cuda");
    case UnaryOp::Relu: return unary_with<Relu>(args, stream, "relu_cuda");
    case UnaryOp::Sigmoid: return unary_with<Sigmoid>(args, stream, "sigmoid_cuda");
    case UnaryOp::Tanh: return unary_with<Tanh>(args, stream, "tanh_cuda");
    case UnaryOp::Gelu: return unary_with<Gelu>(args, stream, "gelu_cuda");
    case UnaryOp::Erf: return unary_with<Erf>(args, stream, "erf_cuda");
    case UnaryOp::Reciprocal: return unary_with<Reciprocal>(args, stream, "reciprocal_cuda");
    case UnaryOp::kCount: break;
  }
  return false;
}

bool launch_binary(BinaryOp op, const Elementwise<3>& args, StreamHandle stream) {
  using namespace functors;
  using B = BinaryOp;
  switch (op) {
    case B::Add: return binary_with<B::Add, Add>(args, stream, "add_cuda");
    case B::Sub: return binary_with<B::Sub, Sub>(args, stream, "sub_cuda");
    case B::Mul: return binary_with<B::Mul, Mul>(args, stream, "mul_cuda");
    case B::Div: return binary_with<B::Div, Div>(args, stream, "div_cuda");
    case B::Pow: return binary_with<B::Pow, Pow>(args, stream, "pow_cuda");
    case B::Maximum: return binary_with<B::Maximum, Maximum>(args, stream, "maximum_cuda");
    case B::Minimum: return binary_with<B::Minimum, Minimum>(args, stream, "minimum_cuda");
    case B::ThresholdBackward:
      return binary_with<B::ThresholdBackward, ThresholdBackward>(args, stream, "threshold_backward_cuda");
    case B::GeluBackward: return binary_with<B::GeluBackward, GeluBackward>(args, stream, "gelu_backward_cuda");
    case B::Eq: return binary_with<B::Eq, Eq>(args, stream, "eq_cuda");
    case B::Ne: return binary_with<B::Ne, Ne>(args, stream, "ne_cuda");
    case B::Lt: return binary_with<B::Lt, Lt>(args, stream, "lt_cuda");
    case B::Le: return binary_with<B::Le, Le>(args, stream, "le_cuda");
    case B::Gt: return binary_with<B::Gt, Gt>(args, stream, "gt_cuda");
    case B::Ge: return binary_with<B::Ge, Ge>(args, stream, "ge_cuda");
    case B::LogicalAnd: return binary_with<B::LogicalAnd, LogicalAnd>(args, stream, "logical_and_cuda");
    case B::LogicalOr: return binary_with<B::LogicalOr, LogicalOr>(args, stream, "logical_or_cuda");
    case B::LogicalXor: return binary_with<B::LogicalXor, LogicalXor>(args, stream, "logical_xor_cuda");
    case B::kCount: break;
  }
  return false;
}

bool launch_where(const Elementwise<4>& args, StreamHandle stream) {
  return dispatch<AllTypes>(args.dtype[0],
                            [&]<typename T>() { launch_elementwise(args, WhereFn<T>{}, stream, "where_cuda"); });
}

bool launch_copy(const Elementwise<2>& args, StreamHandle stream) {
  bool inner = false;
  const bool outer = dispatch<AllTypes>(args.dtype[0], [&]<typename To>() {
    inner = dispatch<AllTypes>(args.dtype[1],
                               [&]<typename From>() { launch_elementwise(args, CopyFn<To, From>{}, stream, "copy_cuda"); });
  });
  return outer && inner;
}

bool launch_fill(const Elementwise<1>& args, double value, std::int64_t integer_value, StreamHandle stream) {
  return dispatch<AllTypes>(args.dtype[0], [&]<typename T>() {
    // Integers take the exact int64 (a double cannot hold every int64); others the double.
    T v;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) v = static_cast<T>(integer_value);
    else v = convert<T>(value);
    launch_elementwise(args, FillFn<T>{v}, stream, "fill_cuda");
  });
}

namespace {
template <class T>
__global__ void arange_kernel(T* out, std::int64_t n, double start, double step) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = convert<T>(start + static_cast<double>(i) * step);
  }
}
}  // namespace

bool launch_arange(char* out, DType dtype, std::int64_t n, double start, double step, StreamHandle stream) {
  if (n == 0) return true;
  return dispatch<NumericTypes>(dtype, [&]<typename T>() {
    arange_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(reinterpret_cast<T*>(out), n, start, step);
    check_launch("arange_cuda");
  });
}

}  // namespace kiln::cuda
