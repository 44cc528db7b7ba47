// core/cpu/cpu_kernels.h — the CPU kernels, declared for the registration list
// (core/cpu/register.cpp). Each family is built in its own file from the shared functors.
// Read next: core/cpu/register.cpp.
#pragma once

#include <array>

#include "core/kernels.h"

namespace kiln::cpu {

std::array<UnaryKernel, static_cast<std::size_t>(UnaryOp::kCount)> unary_kernels();
std::array<BinaryKernel, static_cast<std::size_t>(BinaryOp::kCount)> binary_kernels();
std::array<ReduceKernel, static_cast<std::size_t>(ReduceOp::kCount)> reduce_kernels();

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void copy_kernel(const Tensor& dst, const Tensor& src);
void fill_kernel(const Tensor& dst, const Scalar& value);
void arange_kernel(const Tensor& out, const Scalar& start, const Scalar& step);
void arg_reduce_kernel(const Tensor& values, const Tensor& indices, const Tensor& in,
                       std::int64_t dim, bool is_max);
void var_mean_kernel(const Tensor& var, const Tensor& mean, const Tensor& in, IntArrayRef dims, double divisor);
void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b);
void bmm_bias_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias, bool relu);
void cat_kernel(const Tensor& out, const TensorList& inputs, std::int64_t dim);
void index_select_kernel(const Tensor& out, const Tensor& in, std::int64_t dim,
                         const Tensor& index);
void index_add_kernel(const Tensor& out, std::int64_t dim, const Tensor& index,
                      const Tensor& source);
void gather_kernel(const Tensor& out, const Tensor& in, std::int64_t dim, const Tensor& index);
void scatter_kernel(const Tensor& out, std::int64_t dim, const Tensor& index, const Tensor& src,
                    bool accumulate);
void im2col_kernel(const Tensor& cols, const Tensor& input, const Im2ColGeometry& g,
                   double pad_value);
void col2im_kernel(const Tensor& out, const Tensor& cols, const Im2ColGeometry& g);
void conv2d_forward_kernel(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Im2ColGeometry& g, std::int64_t groups);
void conv2d_forward_relu_kernel(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                                const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_input_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& weight,
                                  const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_weight_kernel(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                                   const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_weight_bias_kernel(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                        const Tensor& input, const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_weight_bias_through_max_pool_kernel(const Tensor& grad_weight, const Tensor& grad_bias,
                                                         const Tensor& grad_pooled, const Tensor& indices,
                                                         const Tensor& values, const Tensor& input,
                                                         const Im2ColGeometry& g, std::int64_t groups);
void conv2d_backward_through_max_pool_kernel(const Tensor& grad_input, const Tensor& grad_weight,
                                             const Tensor& grad_bias, const Tensor& grad_pooled, const Tensor& indices,
                                             const Tensor& values, const Tensor& weight, const Tensor& input,
                                             const Im2ColGeometry& g, std::int64_t groups);
void conv2d_forward_relu_max_pool_kernel(const Tensor& values, const Tensor& indices, const Tensor& input,
                                         const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                         const Im2ColGeometry& pool, std::int64_t groups);
/// At most this many taps per output channel (C/groups · kh · kw) make a convolution "thin" (a
/// first layer): so little arithmetic per output that writing the output bounds it, and its
/// forward and weight gradient are faster as Kiln's direct kernels than as a GEMM or oneDNN
/// (core/cpu/conv_thin.cpp).
inline constexpr std::int64_t kThinConvolutionTaps = 32;
/// Whether a Float32 or BFloat16 convolution with groups = 1 of `input` by `weight` is thin.
bool conv2d_is_thin(const Tensor& input, const Tensor& weight, std::int64_t groups);
/// The forward of a thin convolution, bias (optional) included (contiguous tensors), and with
/// `relu` relu applied to each result as it is stored.
void thin_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Im2ColGeometry& g, bool relu = false);
/// Whether the thin forward can max-pool its rows as it makes them: `pool` (the pool's
/// geometry over the convolution's output) is 2x2, stride 2, no padding or dilation.
bool thin_conv2d_pools_rows(const Im2ColGeometry& pool);
/// The thin forward with relu, max-pooled by `pool` as its rows are made: the pool's values and
/// indices, as max_pool2d_kernel gives them, with the convolution's output never stored.
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
void batch_norm_forward_kernel(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                               const Tensor& input, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var, double momentum, double eps);
void batch_norm_backward_kernel(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                const Tensor& save_mean, const Tensor& save_invstd, double eps);
void pool2d_forward_kernel(const Tensor& out, const Tensor& input, const Im2ColGeometry& g, PoolMode mode);
void pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& input,
                            const Tensor& output, const Im2ColGeometry& g, PoolMode mode);
void max_pool2d_kernel(const Tensor& values, const Tensor& indices, const Tensor& input, const Im2ColGeometry& g);
void max_pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices);
void max_pool2d_backward_relu_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices,
                                     const Tensor& values);
/// max_pool2d_kernel of an input held channel-blocked (`layout`, [N, C, g.height, g.width] with
/// N and C from `values`): values and indices in NCHW, bit for bit max_pool2d_kernel's; with
/// `relu`, of relu(input) (NaN kept), relu computed as each element is read.
void max_pool2d_channel_blocked_kernel(const Tensor& values, const Tensor& indices, const Tensor& input,
                                       const ChannelBlockedLayout& layout, const Im2ColGeometry& g,
                                       bool relu = false);
/// max_pool2d_backward_relu_kernel (or without `values` max_pool2d_backward_kernel) writing its
/// gradient channel-blocked (`layout`, padding lanes zeroed); g is the pool's geometry.
void max_pool2d_backward_relu_channel_blocked_kernel(const Tensor& grad_input, const ChannelBlockedLayout& layout,
                                                     const Tensor& grad_output, const Tensor& indices,
                                                     const Tensor& values, const Im2ColGeometry& g);
void lstm_cell_forward_kernel(const Tensor& gates, const Tensor& c, const Tensor& h, const Tensor& recurrent,
                              const Tensor& projected, const Tensor& c_prev);
void lstm_cell_backward_kernel(const Tensor& grad_gates, const Tensor& grad_c, const Tensor& grad_h,
                               const Tensor& grad_output, const Tensor& gates, const Tensor& c, const Tensor& c_prev);
void softmax_forward_kernel(const Tensor& out, const Tensor& x, std::int64_t dim, bool log);
void softmax_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& y, std::int64_t dim,
                             bool log);
void layer_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                               const Tensor& weight, const Tensor& bias, double eps);
void layer_norm_backward_kernel(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, const Tensor& weight);
void random_kernel(const Tensor& self, RandomKind kind, double a, double b);
void adam_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamStep& step);
void sgd_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& step);
void unscale_kernel(const Tensor& grad, double inv_scale, const Tensor& found_inf);

}  // namespace kiln::cpu
