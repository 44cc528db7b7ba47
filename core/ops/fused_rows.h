// core/ops/fused_rows.h — which device's fused row kernels (softmax, layer norm, the LSTM
// step) serve a tensor, shared by their ops so the three answer the same way.
// Read next: core/ops/softmax.cpp.
#pragma once

#include "core/kernels.h"
#include "core/tensor.h"

namespace kiln::ops {

/// The `family` entries of the kernel table of `t`'s device.
template <class Family>
const Family& fused_kernels_of(const Tensor& t, Family BackendKernels::*family) {
  return kernels_for(t.device().type()).*family;
}

/// Whether a fused kernel of `family` serves `t`: Float32 or Float64 data on a device whose
/// table has the family's forward (a meta tensor's table mirrors the device it stands for).
/// Other dtypes and devices take the composed ops, which every dtype and device has.
template <class Family>
bool has_fused_kernel(const Tensor& t, Family BackendKernels::*family) {
  return (t.dtype() == kFloat32 || t.dtype() == kFloat64) && fused_kernels_of(t, family).forward != nullptr;
}

}  // namespace kiln::ops
