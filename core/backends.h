// core/backends.h — which route conv2d, batch_norm (training) and the 2-D pools take: one
// library op per direction (cuDNN on CUDA) or their composite graphs over Kiln's own kernels.
// Each backend has a default (BackendKernels::prefers_op_kernels: CUDA yes, CPU no); a guard
// overrides it on one thread. Turning the route off on CUDA is PyTorch's
// `torch.backends.cudnn.enabled = False`; turning it on for the CPU runs the cuDNN route's
// autograd over the CPU's reference kernels, which is how that route is tested without a GPU.
// Read next: core/kernels.h (ConvKernels, BatchNormKernels, PoolKernels).
#pragma once

#include <optional>

#include "core/device.h"

namespace kiln::backends {

/// True when ops on `type` take the op-kernel route (the guard's choice, else the default).
bool op_kernels_enabled(DeviceType type);

/// For its lifetime, and on this thread only, takes the op-kernel route on `type` or not.
class OpKernelsGuard {
 public:
  OpKernelsGuard(DeviceType type, bool enabled);
  ~OpKernelsGuard();
  OpKernelsGuard(const OpKernelsGuard&) = delete;
  OpKernelsGuard& operator=(const OpKernelsGuard&) = delete;

 private:
  DeviceType type_;
  std::optional<bool> previous_;
};

}  // namespace kiln::backends
