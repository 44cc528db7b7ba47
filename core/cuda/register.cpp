// core/cuda/register.cpp — the CUDA registration list: every kernel the CUDA backend provides,
// in one place, beside the CPU's (core/cpu/register.cpp). The convolution, batch norm and
// pooling come from cuDNN whole, so the ops take their op kernels on CUDA (prefers_op_kernels).
// Read next: core/cuda/host_kernels.cpp.
#include "core/cuda/cuda.h"
#include "core/cuda/cuda_kernels.h"

namespace kiln::cuda {

void register_kernels(BackendKernels& t) {
  t.unary = unary_kernels();
  t.binary = binary_kernels();
  t.reduce = reduce_kernels();
  t.where = &where_kernel;
  t.copy = &copy_kernel;
  t.fill = &fill_kernel;
  t.arange = &arange_kernel;
  t.arg_reduce = &arg_reduce_kernel;
  t.bmm = &bmm_kernel;
  t.cat = &cat_kernel;
  t.index_select = &index_select_kernel;
  t.index_add = &index_add_kernel;
  t.gather = &gather_kernel;
  t.scatter = &scatter_kernel;
  t.im2col = &im2col_kernel;
  t.col2im = &col2im_kernel;
  t.max_pool2d = &max_pool2d_kernel;
  t.conv2d = {&cudnn_conv2d_forward, &cudnn_conv2d_backward_input, &cudnn_conv2d_backward_weight};
  t.batch_norm = {&cudnn_batch_norm_forward, &cudnn_batch_norm_backward};
  t.pool2d = {&cudnn_pool2d_forward, &cudnn_pool2d_backward};
  t.prefers_op_kernels.fill(true);
  t.random = &random_kernel;
  t.lstm_cell = {&lstm_cell_forward_kernel, &lstm_cell_backward_kernel};
  t.adam = &adam_kernel;
  t.unscale = &unscale_kernel;
}

}  // namespace kiln::cuda
