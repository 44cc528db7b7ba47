// core/cpu/cpu_kernels.h — the CPU kernels, declared for the registration list
// (core/cpu/register.cpp). Each family is built in its own file from the shared functors.
// Read next: core/cpu/register.cpp.
#pragma once

#include <array>

#include "core/kernel_of.h"
#include "core/kernels.h"

namespace kiln::cpu {

std::array<UnaryKernel, static_cast<std::size_t>(UnaryOp::kCount)> unary_kernels();
/// Whether op's kernel computes contiguous `dtype` tensors with Eigen's vectorised array
/// function rather than the shared functor (core/cpu/unary.cpp).
bool unary_has_vectorised_form(UnaryOp op, DType dtype);
std::array<BinaryKernel, static_cast<std::size_t>(BinaryOp::kCount)> binary_kernels();
std::array<ReduceKernel, static_cast<std::size_t>(ReduceOp::kCount)> reduce_kernels();

KernelOf<WhereKernel> where_kernel;
KernelOf<CopyKernel> copy_kernel;
KernelOf<FillKernel> fill_kernel;
KernelOf<ArangeKernel> arange_kernel;
KernelOf<ArgReduceKernel> arg_reduce_kernel;
KernelOf<VarMeanKernel> var_mean_kernel;
KernelOf<BmmKernel> bmm_kernel;
KernelOf<BmmBiasKernel> bmm_bias_kernel;
KernelOf<CatKernel> cat_kernel;
KernelOf<IndexSelectKernel> index_select_kernel;
KernelOf<IndexAddKernel> index_add_kernel;
KernelOf<GatherKernel> gather_kernel;
KernelOf<ScatterKernel> scatter_kernel;
KernelOf<Im2ColKernel> im2col_kernel;
KernelOf<Col2ImKernel> col2im_kernel;
KernelOf<ConvKernels::Forward> conv2d_forward_kernel;
KernelOf<ConvKernels::Forward> conv2d_forward_relu_kernel;
KernelOf<ConvKernels::BackwardInput> conv2d_backward_input_kernel;
KernelOf<ConvKernels::BackwardWeight> conv2d_backward_weight_kernel;
KernelOf<ConvKernels::BackwardWeightBias> conv2d_backward_weight_bias_kernel;
KernelOf<ConvKernels::BackwardWeightBiasThroughMaxPool> conv2d_backward_weight_bias_through_max_pool_kernel;
KernelOf<ConvKernels::BackwardThroughMaxPool> conv2d_backward_through_max_pool_kernel;
KernelOf<ConvKernels::ForwardReluMaxPool> conv2d_forward_relu_max_pool_kernel;
/// The thin kernels (core/cpu/conv_thin.cpp), for a convolution routes::cpu_conv2d calls thin
/// (core/routes.h).
/// The forward of a thin convolution, bias (optional) included (contiguous tensors), and with
/// `relu` relu applied to each result as it is stored.
void thin_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Im2ColGeometry& g, bool relu = false);
/// The thin forward with relu, max-pooled by `pool` (pools_whole_2x2_windows, core/cpu/pool_record.h)
/// as its rows are made: the pool's values and indices, as max_pool2d_kernel gives them (or
/// window records, when `indices` is UInt8), with the convolution's output never stored.
void thin_conv2d_forward_relu_max_pool(const Tensor& values, const Tensor& indices, const Tensor& input,
                                       const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                       const Im2ColGeometry& pool);
/// thin_conv2d_weight_gradient of the gradient max_pool2d_backward_relu_kernel would make from
/// grad_pooled, indices and values, each plane unpooled as it is read; bias as there.
void thin_conv2d_weight_gradient_through_max_pool(const Tensor& grad_weight, const Tensor& grad_pooled,
                                                  const Tensor& indices, const Tensor& values, const Tensor& input,
                                                  const Im2ColGeometry& g, const Tensor& grad_bias);
/// The weight gradient of a thin convolution (contiguous tensors), and with `grad_bias`
/// defined (contiguous, O values) the bias gradient from the same read of grad_output.
void thin_conv2d_weight_gradient(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                                 const Im2ColGeometry& g, const Tensor& grad_bias = Tensor());
KernelOf<BatchNormKernels::Forward> batch_norm_forward_kernel;
KernelOf<BatchNormKernels::Backward> batch_norm_backward_kernel;
KernelOf<PoolKernels::Forward> pool2d_forward_kernel;
KernelOf<PoolKernels::Backward> pool2d_backward_kernel;
KernelOf<MaxPoolKernel> max_pool2d_kernel;
KernelOf<MaxPoolBackwardKernel> max_pool2d_backward_kernel;
KernelOf<MaxPoolBackwardReluKernel> max_pool2d_backward_relu_kernel;
/// max_pool2d_kernel of an input held channel-blocked (`layout`, [N, C, g.height, g.width] with
/// N and C from `values`): values and indices in NCHW, bit for bit max_pool2d_kernel's; with
/// `relu`, of relu(input) (NaN kept), relu computed as each element is read. UInt8 `indices`
/// take window records (Note [A pool window in one byte], core/cpu/pool_record.h).
void max_pool2d_channel_blocked_kernel(const Tensor& values, const Tensor& indices, const Tensor& input,
                                       const ChannelBlockedLayout& layout, const Im2ColGeometry& g,
                                       bool relu = false);
/// max_pool2d_backward_relu_kernel (or without `values` max_pool2d_backward_kernel) writing its
/// gradient channel-blocked (`layout`, padding lanes zeroed); g is the pool's geometry. UInt8
/// `indices` are window records, which say whether each window passes (`values` unread).
void max_pool2d_backward_relu_channel_blocked_kernel(const Tensor& grad_input, const ChannelBlockedLayout& layout,
                                                     const Tensor& grad_output, const Tensor& indices,
                                                     const Tensor& values, const Im2ColGeometry& g);
KernelOf<LstmCellKernels::Forward> lstm_cell_forward_kernel;
KernelOf<LstmCellKernels::Backward> lstm_cell_backward_kernel;
KernelOf<SoftmaxKernels::Forward> softmax_forward_kernel;
KernelOf<SoftmaxKernels::Backward> softmax_backward_kernel;
KernelOf<LayerNormKernels::Forward> layer_norm_forward_kernel;
KernelOf<LayerNormKernels::Backward> layer_norm_backward_kernel;
KernelOf<AttentionKernels::Forward> attention_forward_kernel;
KernelOf<AttentionKernels::Backward> attention_backward_kernel;
KernelOf<RandomKernel> random_kernel;
KernelOf<AdamKernel> adam_kernel;
KernelOf<SgdKernel> sgd_kernel;
KernelOf<UnscaleKernel> unscale_kernel;

/// The convolution's kernels as the CPU's table holds them: each pass on its route
/// (core/cpu/conv_routes.cpp).
namespace routed {
KernelOf<ConvKernels::Forward> conv2d_forward;
KernelOf<ConvKernels::Forward> conv2d_forward_relu;
KernelOf<ConvKernels::BackwardInput> conv2d_backward_input;
KernelOf<ConvKernels::BackwardWeight> conv2d_backward_weight;
KernelOf<ConvKernels::BackwardWeightBias> conv2d_backward_weight_bias;
KernelOf<ConvKernels::ForwardReluMaxPool> conv2d_forward_relu_max_pool;
KernelOf<ConvKernels::BackwardWeightBiasThroughMaxPool> conv2d_backward_weight_bias_through_max_pool;
KernelOf<ConvKernels::BackwardThroughMaxPool> conv2d_backward_through_max_pool;
}  // namespace routed

}  // namespace kiln::cpu
