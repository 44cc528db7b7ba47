// core/onednn/kernels.h — the oneDNN kernels, declared for the registration list
// (core/onednn/register.cpp). Each has the signature of the CPU kernel it stands in for, and
// calls that kernel for what oneDNN does not serve.
// Read next: core/onednn/register.cpp.
#pragma once

#include "core/kernel_of.h"
#include "core/kernels.h"

namespace kiln::onednn {

KernelOf<BmmKernel> bmm_kernel;
KernelOf<BmmBiasKernel> bmm_bias_kernel;
KernelOf<ConvKernels::Forward> conv2d_forward_kernel;
KernelOf<ConvKernels::Forward> conv2d_forward_relu_kernel;
KernelOf<ConvKernels::BackwardInput> conv2d_backward_input_kernel;
KernelOf<ConvKernels::BackwardWeight> conv2d_backward_weight_kernel;
KernelOf<ConvKernels::BackwardWeightBias> conv2d_backward_weight_bias_kernel;
KernelOf<ConvKernels::BackwardWeightBiasThroughMaxPool> conv2d_backward_weight_bias_through_max_pool_kernel;
KernelOf<ConvKernels::BackwardThroughMaxPool> conv2d_backward_through_max_pool_kernel;
KernelOf<ConvKernels::ForwardReluMaxPool> conv2d_forward_relu_max_pool_kernel;

}  // namespace kiln::onednn
