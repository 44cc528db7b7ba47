// core/onednn/kernels.h — the oneDNN kernels the registration list (core/onednn/register.cpp)
// puts over the CPU's: the matrix products. Each has the signature of the CPU kernel it stands
// in for, and calls that kernel for what oneDNN does not serve. The convolution's passes are
// the CPU's route's to call (core/onednn/onednn.h).
// Read next: core/onednn/register.cpp.
#pragma once

#include "core/kernel_of.h"
#include "core/kernels.h"

namespace kiln::onednn {

KernelOf<BmmKernel> bmm_kernel;
KernelOf<BmmBiasKernel> bmm_bias_kernel;

}  // namespace kiln::onednn
