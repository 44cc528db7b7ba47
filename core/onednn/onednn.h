// core/onednn/onednn.h — the CPU's library route: convolution, matrix products, the 2-D pools
// and batch normalisation through oneDNN (Debian's libdnnl-dev), the CPU's counterpart of
// cuDNN and cuBLAS. Kiln's own Eigen kernels stay what they were: the readable reference, and
// the fallback for what oneDNN does not serve (Float64, integer types, BFloat16 on a CPU
// without native BFloat16, a shape oneDNN has no kernel for). Built when CMake finds oneDNN
// (KILN_ONEDNN, cmake/KilnOneDnn.cmake); otherwise stub.cpp leaves the Eigen route in place.
// Which route an op takes is the backends switch (core/backends.h).
// Read next: core/onednn/runtime.h (primitives, their cache, running one), conv.cpp.
#pragma once

#include "core/kernels.h"

namespace kiln::onednn {

/// Puts oneDNN's kernels over the Eigen ones in the CPU's table (each falls back to the one it
/// replaces) and makes the library route the CPU's default. Without oneDNN it changes nothing.
void register_kernels(BackendKernels& table);

}  // namespace kiln::onednn
