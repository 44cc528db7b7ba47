// core/cpu/register.cpp — the CPU registration list: every kernel the CPU backend provides,
// in one place. A new primitive needs a line here (and in core/cuda/register.cpp); the op
// families' lists are checked for completeness at compile time (exactly_one_per).
// Read next: core/cpu/unary.cpp, core/cpu/loops.h.
#include "core/cpu/cpu_kernels.h"
#include "core/onednn/onednn.h"

namespace kiln::cpu {

void register_kernels(BackendKernels& t) {
  t.unary = unary_kernels();
  t.binary = binary_kernels();
  t.reduce = reduce_kernels();
  t.where = &where_kernel;
  t.copy = &copy_kernel;
  t.fill = &fill_kernel;
  t.arange = &arange_kernel;
  t.arg_reduce = &arg_reduce_kernel;
  t.var_mean = &var_mean_kernel;
  t.bmm = &bmm_kernel;
  t.cat = &cat_kernel;
  t.index_select = &index_select_kernel;
  t.index_add = &index_add_kernel;
  t.gather = &gather_kernel;
  t.scatter = &scatter_kernel;
  t.im2col = &im2col_kernel;
  t.col2im = &col2im_kernel;
  t.max_pool2d = &max_pool2d_kernel;
  t.max_pool2d_backward = &max_pool2d_backward_kernel;
  t.max_pool2d_backward_relu = &max_pool2d_backward_relu_kernel;
  t.bmm_bias = &bmm_bias_kernel;
  t.conv2d = {&routed::conv2d_forward,
              &routed::conv2d_backward_input,
              &routed::conv2d_backward_weight,
              &routed::conv2d_forward_relu,
              &routed::conv2d_backward_weight_bias,
              &routed::conv2d_forward_relu_max_pool,
              &routed::conv2d_backward_weight_bias_through_max_pool,
              &routed::conv2d_backward_through_max_pool};
  t.batch_norm = {&batch_norm_forward_kernel, &batch_norm_backward_kernel};
  t.pool2d = {&pool2d_forward_kernel, &pool2d_backward_kernel};
  t.lstm_cell = {&lstm_cell_forward_kernel, &lstm_cell_backward_kernel};
  t.softmax = {&softmax_forward_kernel, &softmax_backward_kernel};
  t.layer_norm = {&layer_norm_forward_kernel, &layer_norm_backward_kernel};
  t.attention = {&attention_forward_kernel, &attention_backward_kernel};
  t.random = &random_kernel;
  t.adam = &adam_kernel;
  t.sgd = &sgd_kernel;
  t.unscale = &unscale_kernel;
  // The library route over these, where Kiln is built with oneDNN.
  onednn::register_kernels(t);
}

}  // namespace kiln::cpu
