// core/routes.h — which kernels each op family runs, decided in one place per family, with the
// reasons as data. A family's rules are read in order and the first that holds is its route:
//
//   convolution     composite graph | CUDA (cuDNN) | Kiln's thin kernels | oneDNN | Eigen
//   pooling         composite graph | CUDA (cuDNN) | Eigen (Kiln's kernels)
//   batch norm      composite graph | CUDA (cuDNN) | Eigen (Kiln's kernels)
//   matrix product                    CUDA (cuBLAS) |                 oneDNN | Eigen
//
// The autograd ops ask routes::conv2d, routes::pool2d and routes::batch_norm whether to record
// the composite graph or call the op kernels; the CPU's kernels ask routes::cpu_conv2d and
// routes::cpu_matrix_product which of their paths runs (core/cpu/conv_routes.cpp,
// core/onednn/matmul.cpp); the compiled step's passes ask which fused kernel a layer can have.
// The backends switch (core/backends.h) is one of the inputs: it turns a family's op-kernel
// route on or off, as PyTorch's torch.backends.cudnn.enabled and mkldnn.enabled do.
// Read next: core/cpu/conv_routes.cpp, core/onednn/conv.cpp.
#pragma once

#include <array>
#include <cstdint>

#include "core/array_ref.h"
#include "core/dtype.h"
#include "core/kernel_params.h"

namespace kiln {
class Tensor;
}

namespace kiln::routes {

enum class Route : std::uint8_t { Composite, Cuda, Thin, OneDnn, Eigen };

struct Rule {
  Route route;
  const char* when;  // the rule, in words
};

/// The route's name in words ("composite", "cuda", "thin", "onednn", "eigen"), for messages.
const char* name(Route route);

/// Whether oneDNN is built in and serves `dtype` on this CPU: Float32 always; BFloat16 where the
/// CPU has native BFloat16 instructions (backends::onednn_has_bf16()).
bool onednn_serves(DType dtype);

/// At most this many taps per output channel (C/groups · kh · kw) make a convolution thin (a
/// first layer): so little arithmetic per output that writing the output bounds it.
inline constexpr std::int64_t kThinConvolutionTaps = 32;
/// Below this many multiply-adds a oneDNN primitive's fixed cost (~2 µs: memory objects, the
/// cache lookup, a fork of the thread team) exceeds the product, and Eigen's GEMM is faster
/// (bench_matmul, 64x64x64: Eigen 10 µs, oneDNN 14 µs on 2 Zen cores).
inline constexpr std::int64_t kMinOneDnnMultiplyAdds = 64 * 64 * 64;

inline constexpr std::array<Rule, 5> kConvolution{{
    {Route::Composite,
     "the device's op-kernel route is off (backends::OpKernelsGuard, PyTorch's torch.backends.cudnn.enabled = "
     "False), or its table has no convolution: unfold + matmul recorded op by op, differentiable to any order "
     "(autograd/functions/conv.cpp)"},
    {Route::Cuda, "a CUDA tensor: cuDNN's convolution (core/cuda/cudnn_conv.cpp)"},
    {Route::Thin,
     "on the CPU, groups = 1, Float32 or BFloat16, and at most kThinConvolutionTaps taps per output channel: "
     "Kiln's direct kernels, faster than a GEMM or oneDNN where writing the output bounds the work "
     "(core/cpu/conv_thin.cpp); a pass with no thin kernel (the input gradient) takes the next rule"},
    {Route::OneDnn,
     "on the CPU with oneDNN built in, in a dtype it serves here (Float32; BFloat16 where the CPU has "
     "AVX512_BF16 or AMX): a cached primitive (core/onednn/conv.cpp), or the next rule's kernels where it "
     "builds none for the sizes (counted in backends::onednn_stats().fallbacks); a BFloat16 weight gradient "
     "on AVX512_BF16 without AMX, 3 wide at unit stride, is Kiln's pair kernel where it serves the sizes "
     "(core/cpu/conv_weight_gradient_pairs.cpp)"},
    {Route::Eigen,
     "on the CPU otherwise (no oneDNN, Float64, Float16): Kiln's reference kernels, unfold + GEMM "
     "(core/cpu/conv.cpp)"},
}};

inline constexpr std::array<Rule, 3> kPooling{{
    {Route::Composite,
     "the device's op-kernel route is off, its table has no pooling, or the window is dilated: unfold + max or "
     "mean recorded op by op (autograd/functions/conv.cpp)"},
    {Route::Cuda, "a CUDA tensor: cuDNN's pooling (core/cuda/cudnn_pool.cpp)"},
    {Route::Eigen,
     "on the CPU: Kiln's pool kernels (core/cpu/pool.cpp); oneDNN's measured slower on plain NCHW "
     "(Note [What the CPU's library route covers] in core/onednn/register.cpp)"},
}};

inline constexpr std::array<Rule, 3> kBatchNorm{{
    {Route::Composite,
     "the device's op-kernel route is off, its table has no batch norm, the input is not floating, or a weight, "
     "bias or running statistic is not in the statistics dtype on the input's device: mean, var and "
     "elementwise ops recorded op by op (autograd/functions/nn.cpp)"},
    {Route::Cuda, "a CUDA tensor: cuDNN's batch norm (core/cuda/cudnn_batch_norm.cpp)"},
    {Route::Eigen,
     "on the CPU: Kiln's kernels (core/cpu/batch_norm.cpp), whose sums keep Float32's accuracy where oneDNN's "
     "statistics did not (Note [What the CPU's library route covers])"},
}};

inline constexpr std::array<Rule, 3> kMatrixProduct{{
    {Route::Cuda, "a CUDA tensor: cuBLAS (core/cuda/blas.cpp)"},
    {Route::OneDnn,
     "on the CPU with oneDNN built in and the matrix-product route on, a dtype it serves here, both operands in "
     "the output's dtype, and at least kMinOneDnnMultiplyAdds multiply-adds: a cached primitive "
     "(core/onednn/matmul.cpp), or the next rule where it builds none for the sizes"},
    {Route::Eigen, "on the CPU otherwise: Eigen's GEMM (core/cpu/gemm.cpp)"},
}};

/// The route of a convolution of `input` by a weight of sizes `weight_sizes` in `groups`.
Route conv2d(const Tensor& input, IntArrayRef weight_sizes, std::int64_t groups);
/// The CPU's convolution kernels' route for one pass (Thin, OneDnn or Eigen): the rules after
/// the op-kernel route was taken, for a CPU tensor of `dtype`.
Route cpu_conv2d(DType dtype, IntArrayRef weight_sizes, std::int64_t groups);
/// The route of a 2-D pool of `input` with geometry `g`.
Route pool2d(const Tensor& input, const Im2ColGeometry& g);
/// The route of a training-mode batch norm of `input` with these parameters and statistics
/// (each may be undefined).
Route batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                 const Tensor& running_var);
/// The CPU's route for the batched product out = a @ b ([B, n, k] @ [B, k, m]): OneDnn or Eigen.
Route cpu_matrix_product(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace kiln::routes
