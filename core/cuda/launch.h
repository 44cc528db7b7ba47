// core/cuda/launch.h — the boundary between host C++ and the CUDA kernels. The kernels
// (core/cuda/*.cu, compiled by nvcc) see only plain structs of pointers, sizes and strides,
// never a Tensor: nvcc then compiles nothing of Kiln but the math, which keeps CUDA builds
// fast and the kernels independent of Eigen. core/cuda/host_kernels.cpp turns Tensors into these
// structs (broadcasting and merging dimensions first); core/cuda/register.cpp fills the kernel
// table with them.
// Read next: core/cuda/loops.cuh (how the kernels walk these structs).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/kernel_params.h"
#include "core/ops/functors.h"

namespace kiln::cuda {

/// cudaStream_t, without including the CUDA headers here.
using StreamHandle = void*;

/// Dimensions a kernel indexes after merging; register.cpp refuses more with a clear error.
inline constexpr int kMaxDims = 10;

/// N operands sharing one iteration shape; strides in elements (0 where broadcast).
/// Operand 0 is the output.
template <int N>
struct Elementwise {
  char* data[N];
  DType dtype[N];
  std::int64_t strides[N][kMaxDims];
  std::int64_t sizes[kMaxDims];
  int dims = 0;
  std::int64_t numel = 0;
  bool contiguous = false;  // every operand dense in the same order: index i is offset i
};

/// A reduction: out[o] = reduce(in[base(o) + inner offsets]) over `inner` elements.
/// Output and reduced dims are split so a kernel can walk each separately.
struct Reduction {
  char* out;
  const char* in;
  std::int64_t outer_sizes[kMaxDims], outer_in_strides[kMaxDims], outer_out_strides[kMaxDims];
  std::int64_t inner_sizes[kMaxDims], inner_strides[kMaxDims];
  int outer_dims = 0, inner_dims = 0;
  std::int64_t outputs = 0, inner = 0;
  double divisor = 1;  // a floating sum's result is divided by it (a mean's count)
  /// Blocks that share each output (reduction_parts); above 1, `partials` holds 8 bytes for
  /// each of outputs * parts blocks' results, taken by the host from the caching allocator.
  std::int64_t parts = 1;
  void* partials = nullptr;
};

// Note [Reductions of few outputs over many elements]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// One block per output leaves a GPU idle when there are few outputs: a full sum of 25.7 M
// floats ran on one of the H200's 132 multiprocessors and took ~80 ms (BM_Conv2dForwardBackward
// measured its .sum(), not its convolutions). Such a reduction runs in two passes instead:
// `parts` blocks share each output, each writing its result to `partials`, and one block per
// output then combines its parts in order. `parts` depends on the shape alone, so a sum adds
// in the same order on every run (PyTorch's global reductions stage partials the same way).
// Each block reads at least kReduceElementsPerBlock elements, and the first pass has at most
// kReducePartials blocks (a few waves of the largest GPU, and 32 KiB of partials).
inline constexpr std::int64_t kReduceElementsPerBlock = 8192;
inline constexpr std::int64_t kReducePartials = 4096;

/// How many blocks share each output (Note [Reductions of few outputs over many elements]).
inline std::int64_t reduction_parts(std::int64_t outputs, std::int64_t inner) {
  if (outputs <= 0 || inner < 2 * kReduceElementsPerBlock || outputs > kReducePartials / 2) return 1;
  const std::int64_t by_work = (inner + kReduceElementsPerBlock - 1) / kReduceElementsPerBlock;
  const std::int64_t by_grid = kReducePartials / outputs;
  return by_work < by_grid ? by_work : by_grid;
}

/// Launchers, one per kernel family (defined in the .cu files). Each returns false, launching
/// nothing, when it has no kernel for the dtype.
bool launch_unary(UnaryOp op, const Elementwise<2>& args, StreamHandle stream);
bool launch_binary(BinaryOp op, const Elementwise<3>& args, StreamHandle stream);
bool launch_where(const Elementwise<4>& args, StreamHandle stream);
bool launch_copy(const Elementwise<2>& args, StreamHandle stream);
/// value is passed as a double and as an int64 (exact for wide integers).
bool launch_fill(const Elementwise<1>& args, double value, std::int64_t integer_value, StreamHandle stream);
bool launch_arange(char* out, DType dtype, std::int64_t n, double start, double step, StreamHandle stream);

bool launch_reduce(ReduceOp op, DType dtype, const Reduction& r, StreamHandle stream);
/// values/indices over `size` elements of stride `stride`, for outer*inner positions.
bool launch_arg_reduce(DType dtype, char* values, std::int64_t* indices, const char* in, std::int64_t outer,
                       std::int64_t size, std::int64_t inner, bool is_max, StreamHandle stream);

/// Row gathers and scatters along one dim of contiguous tensors viewed as [outer, size, inner].
bool launch_index_select(DType dtype, char* out, const char* in, const std::int64_t* index, std::int64_t outer,
                         std::int64_t in_size, std::int64_t index_size, std::int64_t inner, StreamHandle stream);
bool launch_index_add(DType dtype, char* out, const char* source, const std::int64_t* index, std::int64_t outer,
                      std::int64_t out_size, std::int64_t index_size, std::int64_t inner, StreamHandle stream);
/// gather/scatter on contiguous tensors: index has the iteration shape [outer, index_size,
/// inner]; `self` is [outer, self_size, inner].
bool launch_gather(DType dtype, char* out, const char* in, const std::int64_t* index, std::int64_t outer,
                   std::int64_t in_size, std::int64_t index_size, std::int64_t inner, StreamHandle stream);
bool launch_scatter(DType dtype, char* out, const char* src, const std::int64_t* index, std::int64_t outer,
                    std::int64_t out_size, std::int64_t index_size, std::int64_t inner, bool accumulate,
                    StreamHandle stream);

/// im2col / col2im / max-pool on contiguous [N, C, H, W] images; cols rows may be strided
/// (row stride, image stride), as on the CPU.
bool launch_im2col(DType dtype, char* cols, std::int64_t cols_image_stride, std::int64_t cols_row_stride,
                   const char* input, std::int64_t batch, const Im2ColGeometry& g, double pad_value,
                   StreamHandle stream);
bool launch_col2im(DType dtype, char* out, const char* cols, std::int64_t cols_image_stride,
                   std::int64_t cols_row_stride, std::int64_t batch, const Im2ColGeometry& g, StreamHandle stream);
bool launch_max_pool2d(DType dtype, char* values, std::int64_t* indices, const char* input, std::int64_t planes,
                       const Im2ColGeometry& g, StreamHandle stream);

/// Counter-based random numbers (Philox4x32-10): the value at position i depends only on
/// (seed, offset, i), so results do not depend on the launch configuration.
bool launch_random(DType dtype, char* out, std::int64_t n, RandomKind kind, double a, double b, std::uint64_t seed,
                   std::uint64_t offset, StreamHandle stream);

/// One fused LSTM step (core/cuda/rnn.cu): gates [B, 4H], the rest [B, H], all contiguous;
/// grad_output may be null.
bool launch_lstm_cell_forward(DType dtype, char* gates, char* c, char* h, const char* recurrent, const char* projected,
                              const char* c_prev, std::int64_t batch, std::int64_t hidden, StreamHandle stream);
bool launch_lstm_cell_backward(DType dtype, char* grad_gates, char* grad_c, const char* grad_h, const char* grad_output,
                               const char* gates, const char* c, const char* c_prev, std::int64_t batch,
                               std::int64_t hidden, StreamHandle stream);

bool launch_adam(DType dtype, char* param, const char* grad, char* exp_avg, char* exp_avg_sq, char* max_exp_avg_sq,
                 std::int64_t n, const AdamStep& step, StreamHandle stream);

/// GradScaler's pass: grads *= inv_scale in place, and *found_inf = 1 if any is inf/NaN.
bool launch_unscale_and_check(DType dtype, char* grad, std::int64_t n, float inv_scale, float* found_inf,
                              StreamHandle stream);

}  // namespace kiln::cuda
