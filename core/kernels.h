// core/kernels.h — the kernel tables: for every primitive, one function pointer per device
// type, filled by one explicit registration list per backend (core/cpu/register.cpp,
// core/cuda/register.cpp, core/meta/register.cpp, whose kernels compute nothing). No
// static-initialiser magic: the tables are built the first time an op asks for them. Raw ops
// (core/ops/) validate and allocate, then call through here.
// Kernels receive tensors that are already checked: same device, the dtypes the op settled
// on, broadcast-compatible shapes. They may assume nothing about strides unless noted.
// Read next: core/cpu/register.cpp.
#pragma once

#include <array>
#include <cstdint>

#include "core/backends.h"
#include "core/kernel_params.h"
#include "core/ops/functors.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace kiln {

// out = op(in): same dtype, same shape.
using UnaryKernel = void (*)(const Tensor& out, const Tensor& in);
// out = op(a, b): a and b share a dtype and broadcast to out's shape.
using BinaryKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& b);
// out = cond ? a : b (cond Bool; a, b of out's dtype; all broadcast to out).
using WhereKernel = void (*)(const Tensor& out, const Tensor& cond, const Tensor& a,
                             const Tensor& b);
// dst = src converted to dst's dtype; src broadcasts to dst; both on this device.
using CopyKernel = void (*)(const Tensor& dst, const Tensor& src);
using FillKernel = void (*)(const Tensor& dst, const Scalar& value);
// out[i] = start + i * step over a contiguous out.
using ArangeKernel = void (*)(const Tensor& out, const Scalar& start, const Scalar& step);
// out has in's shape with the reduced dims set to 1 (keepdim), and in's dtype. A floating sum
// is divided by `divisor` before its one rounding to out's dtype (mean and var: Note [How
// Kiln sums] in core/cpu/cascade_sum.h); every other reduction is given divisor 1.
using ReduceKernel = void (*)(const Tensor& out, const Tensor& in, IntArrayRef dims, double divisor);
// var = Σ (in - mean)² / divisor over dims (divisor = N - correction) and, when `mean` is
// defined, mean; both keepdim-shaped, in's (floating) dtype, each rounded once.
using VarMeanKernel = void (*)(const Tensor& var, const Tensor& mean, const Tensor& in, IntArrayRef dims,
                               double divisor);
// values/indices have in's shape with dim set to 1; first index of the extreme; NaN wins.
using ArgReduceKernel = void (*)(const Tensor& values, const Tensor& indices, const Tensor& in,
                                 std::int64_t dim, bool is_max);
// out[b] = a[b] @ c[b] for 3-d a [B, M, K], c [B, K, N]; out contiguous [B, M, N].
// Batch strides may be 0 (a broadcast operand).
using BmmKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& c);
// out = a @ c + bias, then relu when `relu` (linear's forward in one kernel: oneDNN's bias, and
// Kiln's relu over the result while it is in cache); bias [N] broadcasts over out's rows. A fused kernel for compiled steps
// (compile/passes/); optional.
using BmmBiasKernel = void (*)(const Tensor& out, const Tensor& a, const Tensor& c, const Tensor& bias, bool relu);
// out is contiguous; inputs share out's dtype and all dims but `dim`.
using CatKernel = void (*)(const Tensor& out, const TensorList& inputs, std::int64_t dim);
// out.select(dim, i) = in.select(dim, index[i]); index Int64 1-d, validated.
using IndexSelectKernel = void (*)(const Tensor& out, const Tensor& in, std::int64_t dim,
                                   const Tensor& index);
// out.select(dim, index[i]) += source.select(dim, i) (out already holds self).
using IndexAddKernel = void (*)(const Tensor& out, std::int64_t dim, const Tensor& index,
                                const Tensor& source);
// out[..i..] = in[..index[..i..]..] along dim (index Int64, same rank).
using GatherKernel = void (*)(const Tensor& out, const Tensor& in, std::int64_t dim,
                              const Tensor& index);
// out[..index[..i..]..] = src[..i..] (or +=) along dim (out already holds self).
using ScatterKernel = void (*)(const Tensor& out, std::int64_t dim, const Tensor& index,
                               const Tensor& src, bool accumulate);
// cols [N, C*kh*kw, out_h*out_w] from input [N, C, H, W]; padding reads pad_value.
using Im2ColKernel = void (*)(const Tensor& cols, const Tensor& input, const Im2ColGeometry& g,
                              double pad_value);
// out [N, C, H, W] = sum of cols over overlapping windows (out is zeroed by the caller).
using Col2ImKernel = void (*)(const Tensor& out, const Tensor& cols, const Im2ColGeometry& g);
// values/indices [N, C, oh, ow] = max over each window of input [N, C, H, W] (contiguous);
// indices are flat positions in the H*W plane.
using MaxPoolKernel = void (*)(const Tensor& values, const Tensor& indices, const Tensor& input,
                               const Im2ColGeometry& g);
// grad_input [N, C, H, W] = zero, plus each grad_output [N, C, oh, ow] element added onto the
// element of its plane that indices (MaxPoolKernel's) names; all contiguous. An index outside
// the plane is an IndexError.
using MaxPoolBackwardKernel = void (*)(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices);
// MaxPoolBackwardKernel followed by relu's backward (threshold_backward) against the pooled
// input, in one pass: a window's gradient reaches its winner only where `values` (the
// forward's output, which is the winner's value) is positive; NaN passes, as in
// threshold_backward. A fused kernel for compiled steps (compile/passes/); optional. On the CPU
// it also takes UInt8 window records for indices, whose bit replaces the test on `values`
// (Note [A pool window in one byte], core/cpu/pool_record.h), as do the convolution kernels
// below that take a pool's indices.
using MaxPoolBackwardReluKernel = void (*)(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices,
                                           const Tensor& values);
// The op kernels (core/backends.h): conv2d, training-mode batch_norm and the 2-D pools as
// one kernel per direction. cuDNN on CUDA; on the CPU, reference implementations with raw ops
// (unfold + GEMM for convolution), which its ops do not take by default.
//
// Convolution: all tensors contiguous; input [N, C, H, W], weight [O, C/groups, kh, kw],
// output [N, O, out_h, out_w]; g describes the input and the window. The forward adds bias
// [O] to every output position when it is defined (one pass over the output, not two).
// The two backward kernels are the adjoints of the forward in one argument each.
struct ConvKernels {
  using Forward = void (*)(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Im2ColGeometry& g, std::int64_t groups);
  using BackwardInput = void (*)(const Tensor& grad_input, const Tensor& grad_output,
                                 const Tensor& weight, const Im2ColGeometry& g, std::int64_t groups);
  using BackwardWeight = void (*)(const Tensor& grad_weight, const Tensor& grad_output,
                                  const Tensor& input, const Im2ColGeometry& g, std::int64_t groups);
  using BackwardWeightBias = void (*)(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                      const Tensor& input, const Im2ColGeometry& g, std::int64_t groups);
  using BackwardWeightBiasThroughMaxPool = void (*)(const Tensor& grad_weight, const Tensor& grad_bias,
                                                    const Tensor& grad_pooled, const Tensor& indices,
                                                    const Tensor& values, const Tensor& input,
                                                    const Im2ColGeometry& g, std::int64_t groups);
  using ForwardReluMaxPool = void (*)(const Tensor& values, const Tensor& indices, const Tensor& input,
                                      const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                      const Im2ColGeometry& pool, std::int64_t groups);
  using BackwardThroughMaxPool = void (*)(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                          const Tensor& grad_pooled, const Tensor& indices, const Tensor& values,
                                          const Tensor& weight, const Tensor& input, const Im2ColGeometry& g,
                                          std::int64_t groups);
  Forward forward = nullptr;
  BackwardInput backward_input = nullptr;
  BackwardWeight backward_weight = nullptr;
  /// The forward with relu applied to its output (as the thin kernel stores each row; after
  /// oneDNN's primitive, whose own relu drops NaN). A fused kernel for compiled steps
  /// (compile/passes/); optional.
  Forward forward_relu = nullptr;
  /// The weight gradient and the bias gradient (grad_output summed over N, H and W into a
  /// contiguous [1, O, 1, 1]) from one read of grad_output (oneDNN's diff_bias). A fused kernel
  /// for compiled steps; optional. oneDNN sums in its own order (Note [The bias gradient inside
  /// the weight gradient] in compile/passes/fuse_conv_bias_backward.cpp).
  BackwardWeightBias backward_weight_bias = nullptr;
  /// forward_relu, then max_pool2d (MaxPoolKernel's values and indices) with geometry `pool`
  /// over its output: for a thin first layer one pass that never stores the convolution's
  /// output (Note [A thin convolution pooled as it is made]). A fused kernel; optional.
  ForwardReluMaxPool forward_relu_max_pool = nullptr;
  /// backward_weight_bias of the gradient that max_pool2d_backward_relu (MaxPoolBackwardReluKernel)
  /// makes from grad_pooled, indices and values: for a thin layer one pass that unpools each
  /// plane where the weight gradient reads it, the unpooled gradient never stored (Note [A thin
  /// layer's weight gradient read through its pool]). A fused kernel; optional.
  BackwardWeightBiasThroughMaxPool backward_weight_bias_through_max_pool = nullptr;
  /// backward_input and backward_weight_bias of the gradient max_pool2d_backward_relu makes from
  /// grad_pooled, indices and values: on oneDNN's route the gradient is unpooled straight into
  /// the layout both primitives read (Note [A convolution's blocked output pooled where it lies]
  /// in core/cpu/pool.cpp). A fused kernel for compiled steps; optional.
  BackwardThroughMaxPool backward_through_max_pool = nullptr;
};
// Training-mode batch normalisation: input [N, C, *] contiguous; weight, bias and the statistics [C] in the statistics dtype (input's,
// or Float32 for Float16/BFloat16 inputs, as cuDNN wants); save_mean
// and save_invstd receive the batch mean and 1/sqrt(biased var + eps); running stats (may be
// undefined) move by `momentum` towards the batch's, the variance unbiased, as in PyTorch.
struct BatchNormKernels {
  using Forward = void (*)(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                           const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, double momentum, double eps);
  using Backward = void (*)(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                            const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                            const Tensor& save_mean, const Tensor& save_invstd, double eps);
  Forward forward = nullptr;
  Backward backward = nullptr;
};
// 2-D max or average pooling without dilation: input [N, C, H, W] contiguous, output
// [N, C, out_h, out_w]. The backward also gets the forward's input and output (cuDNN's max
// backward finds each window's winner from them).
struct PoolKernels {
  using Forward = void (*)(const Tensor& out, const Tensor& input, const Im2ColGeometry& g, PoolMode mode);
  using Backward = void (*)(const Tensor& grad_input, const Tensor& grad_output, const Tensor& input,
                            const Tensor& output, const Im2ColGeometry& g, PoolMode mode);
  Forward forward = nullptr;
  Backward backward = nullptr;
};
// One LSTM time step over a batch, fused (Note [The fused LSTM layer] in
// autograd/functions/rnn.cpp). Every tensor is contiguous, [B, 4H] or [B, H], of one floating
// dtype. Gate order i, f, g, o.
struct LstmCellKernels {
  // gates = (σ, σ, tanh, σ) of recurrent + projected; c = f c_prev + i g; h = o tanh(c).
  using Forward = void (*)(const Tensor& gates, const Tensor& c, const Tensor& h, const Tensor& recurrent,
                           const Tensor& projected, const Tensor& c_prev);
  // grad_gates = the gradient of the pre-activations. grad_c holds dL/dc on entry and dL/dc_prev
  // on return; grad_h is dL/dh from the next step, plus grad_output (undefined: none) from the
  // layer's output at this step.
  using Backward = void (*)(const Tensor& grad_gates, const Tensor& grad_c, const Tensor& grad_h,
                            const Tensor& grad_output, const Tensor& gates, const Tensor& c, const Tensor& c_prev);
  Forward forward = nullptr;
  Backward backward = nullptr;
};
// Softmax or log-softmax along `dim` of a contiguous tensor, in one pass per row (Note [One
// pass per softmax row] in core/cpu/softmax.cpp). y is the forward's output; the backward
// writes grad_input = y (g - Σ g y) for softmax, g - exp(y) Σ g for log-softmax.
struct SoftmaxKernels {
  using Forward = void (*)(const Tensor& out, const Tensor& x, std::int64_t dim, bool log);
  using Backward = void (*)(const Tensor& grad_input, const Tensor& grad_output, const Tensor& y, std::int64_t dim,
                            bool log);
  Forward forward = nullptr;
  Backward backward = nullptr;
};
// Layer normalisation of each row of a contiguous [M, N] input (N: the normalized shape's
// elements); weight and bias [N] or undefined. The forward saves each row's mean and 1/std
// ([M]) for the backward, which writes whichever of grad_input, grad_weight and grad_bias are
// defined.
struct LayerNormKernels {
  using Forward = void (*)(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                           const Tensor& weight, const Tensor& bias, double eps);
  using Backward = void (*)(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                            const Tensor& grad_output, const Tensor& input, const Tensor& mean, const Tensor& rstd,
                            const Tensor& weight);
  Forward forward = nullptr;
  Backward backward = nullptr;
};
// Scaled dot-product attention over each head b of q [B, L, D], k and v [B, S, D]: probs
// [B, L, S] (contiguous) = softmax(q kᵀ · scale + mask) along S, out [B, L, D] = probs v; the
// backward writes grad_q, grad_k and grad_v from grad_out and the forward's probs. scale is a
// 0-dim tensor of q's dtype; mask is undefined or a [B, L, S] view (broadcast strides allowed);
// every [.., D] operand and the mask have contiguous rows (last stride 1). q, k, v, out, grad_out
// and the gradients may instead be [B1, B2, rows, D] with B1 · B2 = B (head b = b1 · B2 + b2):
// heads interleaved in rows that no single batch stride reaches. Optional: made only
// by fuse_attention in a compiled step (Note [Attention a head at a time] in core/cpu/attention.cpp).
struct AttentionKernels {
  using Forward = void (*)(const Tensor& out, const Tensor& probs, const Tensor& q, const Tensor& k, const Tensor& v,
                           const Tensor& mask, const Tensor& scale);
  using Backward = void (*)(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& grad_out,
                            const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                            const Tensor& scale);
  Forward forward = nullptr;
  Backward backward = nullptr;
};
// Fills self with random values; a and b are the distribution's parameters.
using RandomKernel = void (*)(const Tensor& self, RandomKind kind, double a, double b);
// One fused Adam/AdamW update of param, exp_avg, exp_avg_sq (and max_exp_avg_sq with
// amsgrad) in place; all contiguous, same shape and dtype.
using AdamKernel = void (*)(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                            const Tensor& exp_avg_sq, const Tensor& max_exp_avg_sq, const AdamStep& step);
// One fused SGD update of param (and the momentum buffer, when defined) in place; all
// contiguous, same shape and dtype.
using SgdKernel = void (*)(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                           const SgdStep& step);
// GradScaler's pass over one gradient: grad *= inv_scale in place, and found_inf (one
// Float32 element, same device) is set to 1 if any element of grad is inf or NaN. grad is
// contiguous and floating.
using UnscaleKernel = void (*)(const Tensor& grad, double inv_scale, const Tensor& found_inf);

/// Every kernel one backend provides.
struct BackendKernels {
  std::array<UnaryKernel, static_cast<std::size_t>(UnaryOp::kCount)> unary{};
  std::array<BinaryKernel, static_cast<std::size_t>(BinaryOp::kCount)> binary{};
  std::array<ReduceKernel, static_cast<std::size_t>(ReduceOp::kCount)> reduce{};
  WhereKernel where = nullptr;
  CopyKernel copy = nullptr;
  FillKernel fill = nullptr;
  ArangeKernel arange = nullptr;
  ArgReduceKernel arg_reduce = nullptr;
  VarMeanKernel var_mean = nullptr;  // optional: else composed from mean, sub, mul (ops::var_mean)
  BmmKernel bmm = nullptr;
  BmmBiasKernel bmm_bias = nullptr;
  CatKernel cat = nullptr;
  IndexSelectKernel index_select = nullptr;
  IndexAddKernel index_add = nullptr;
  GatherKernel gather = nullptr;
  ScatterKernel scatter = nullptr;
  Im2ColKernel im2col = nullptr;
  Col2ImKernel col2im = nullptr;
  MaxPoolKernel max_pool2d = nullptr;
  MaxPoolBackwardKernel max_pool2d_backward = nullptr;  // optional: else zeros + scatter_add
  MaxPoolBackwardReluKernel max_pool2d_backward_relu = nullptr;  // optional
  ConvKernels conv2d{};
  BatchNormKernels batch_norm{};
  PoolKernels pool2d{};
  LstmCellKernels lstm_cell{};
  SoftmaxKernels softmax{};
  LayerNormKernels layer_norm{};
  AttentionKernels attention{};  // optional
  /// Which op families take the op kernels by default (core/backends.h), by backends::OpFamily.
  std::array<bool, static_cast<std::size_t>(backends::OpFamily::kCount)> prefers_op_kernels{};
  RandomKernel random = nullptr;
  AdamKernel adam = nullptr;
  SgdKernel sgd = nullptr;
  UnscaleKernel unscale = nullptr;
};

/// The table raw ops call for one device type: the registered one, or, while a step is being
/// captured on this thread, the capture's recording table (core/capture_hooks.h).
const BackendKernels& kernels_for(DeviceType type);
/// The registered table for one device type (built on first use), whatever this thread does.
const BackendKernels& registered_kernels(DeviceType type);

/// Returns `fn`, or throws NotImplementedError naming the op and the device.
template <class Fn>
Fn require_kernel(Fn fn, const char* op, Device device) {
  KILN_CHECK_NOT_IMPLEMENTED(fn != nullptr, "Could not run '", op, "' with arguments from the '",
                             device_type_name(device.type()), "' backend");
  return fn;
}

/// Builds an array from exactly one entry per enum member: a family member added without a
/// kernel fails to compile (ggml's tripwire).
template <class Fn, class Enum, class... Entries>
constexpr std::array<Fn, static_cast<std::size_t>(Enum::kCount)> exactly_one_per(
    Entries... entries) {
  static_assert(sizeof...(Entries) == static_cast<std::size_t>(Enum::kCount),
                "every member of the op family needs exactly one kernel in this list");
  return {entries...};
}

namespace cpu {
void register_kernels(BackendKernels& table);
}

namespace meta {
/// Fills `table` with kernels that compute nothing, present where `real` (the table of the
/// device meta tensors stand for) has a kernel; with `plans_scratch`, the CPU's kernels that
/// take scratch memory of their own are `real`'s (Note [The meta device is a backend]).
void register_kernels(BackendKernels& table, const BackendKernels& real, bool plans_scratch);
/// `cpu` without its optional kernels (the fused and op kernels): what a build without CUDA
/// assumes CUDA has when it plans a CUDA step.
BackendKernels kernels_every_backend_has(const BackendKernels& cpu);
}

}  // namespace kiln
