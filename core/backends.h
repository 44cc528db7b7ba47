// core/backends.h — which route conv2d, batch_norm (training) and the 2-D pools take: one
// library op per direction (cuDNN on CUDA, oneDNN on the CPU) or their composite graphs over
// Kiln's own kernels. On the CPU the switch also picks oneDNN or Eigen for matrix products.
// Each backend has a default per op family (BackendKernels::prefers_op_kernels: every family on
// CUDA; on the CPU built with oneDNN, convolution and matrix products, where oneDNN is faster,
// while pooling and batch norm keep Kiln's own kernels, see core/onednn/register.cpp); a
// guard overrides every family on one thread. Turning the route off is PyTorch's
// `torch.backends.cudnn.enabled = False` (or `torch.backends.mkldnn.enabled = False`);
// turning it on for a CPU without oneDNN runs the library route's autograd over the CPU's
// reference kernels, which is how that route is tested without a GPU.
// Read next: core/kernels.h (ConvKernels, BatchNormKernels, PoolKernels), core/onednn/onednn.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/device.h"

namespace kiln::backends {

/// The op families the switch routes.
enum class OpFamily : std::uint8_t { Convolution, Pooling, BatchNorm, MatrixProduct, kCount };

/// True when `family` on `type` takes the op-kernel route (the guard's choice, else the default).
bool op_kernels_enabled(DeviceType type, OpFamily family);

/// Whether this build has oneDNN, the CPU's library route (PyTorch's
/// torch.backends.mkldnn.is_available()).
bool onednn_is_available();
/// The instruction set oneDNN runs on this CPU ("avx2", "avx512_core_bf16", ...), or "" without it.
std::string onednn_cpu_isa();
/// Whether oneDNN has native BFloat16 kernels here (AVX512_BF16 or AMX): only then does CPU
/// autocast make convolutions and matrix products faster.
bool onednn_has_bf16();

struct OneDnnStats {
  std::int64_t primitives_created = 0;  // JIT-compiled kernels, one per shape (Note [The primitive cache])
  std::int64_t fallbacks = 0;           // calls handed to the Eigen route: no oneDNN kernel for the shape
  std::int64_t reorders = 0;            // layout changes at op boundaries (Note [Layouts at op boundaries])
};
/// Counters of the oneDNN route since the program started (zeros without oneDNN).
OneDnnStats onednn_stats();

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
