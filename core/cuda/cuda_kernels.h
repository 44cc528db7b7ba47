// core/cuda/cuda_kernels.h — the CUDA kernels, declared for the registration list
// (core/cuda/register.cpp) with the signatures of their table slots (core/kernel_of.h). The
// elementwise, reduction and indexing kernels' host sides are core/cuda/host_kernels.cpp; the
// library routes are core/cuda/blas.cpp (cuBLAS) and cudnn_*.cpp (cuDNN).
// Read next: core/cuda/register.cpp.
#pragma once

#include <array>

#include "core/kernel_of.h"
#include "core/kernels.h"

namespace kiln::cuda {

std::array<UnaryKernel, static_cast<std::size_t>(UnaryOp::kCount)> unary_kernels();
std::array<BinaryKernel, static_cast<std::size_t>(BinaryOp::kCount)> binary_kernels();
std::array<ReduceKernel, static_cast<std::size_t>(ReduceOp::kCount)> reduce_kernels();

KernelOf<WhereKernel> where_kernel;
KernelOf<CopyKernel> copy_kernel;
KernelOf<FillKernel> fill_kernel;
KernelOf<ArangeKernel> arange_kernel;
KernelOf<ArgReduceKernel> arg_reduce_kernel;
KernelOf<BmmKernel> bmm_kernel;
KernelOf<CatKernel> cat_kernel;
KernelOf<IndexSelectKernel> index_select_kernel;
KernelOf<IndexAddKernel> index_add_kernel;
KernelOf<GatherKernel> gather_kernel;
KernelOf<ScatterKernel> scatter_kernel;
KernelOf<Im2ColKernel> im2col_kernel;
KernelOf<Col2ImKernel> col2im_kernel;
KernelOf<MaxPoolKernel> max_pool2d_kernel;
KernelOf<ConvKernels::Forward> cudnn_conv2d_forward;
KernelOf<ConvKernels::BackwardInput> cudnn_conv2d_backward_input;
KernelOf<ConvKernels::BackwardWeight> cudnn_conv2d_backward_weight;
KernelOf<BatchNormKernels::Forward> cudnn_batch_norm_forward;
KernelOf<BatchNormKernels::Backward> cudnn_batch_norm_backward;
KernelOf<PoolKernels::Forward> cudnn_pool2d_forward;
KernelOf<PoolKernels::Backward> cudnn_pool2d_backward;
KernelOf<RandomKernel> random_kernel;
KernelOf<LstmCellKernels::Forward> lstm_cell_forward_kernel;
KernelOf<LstmCellKernels::Backward> lstm_cell_backward_kernel;
KernelOf<AdamKernel> adam_kernel;
KernelOf<UnscaleKernel> unscale_kernel;

}  // namespace kiln::cuda
