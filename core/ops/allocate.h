// core/ops/allocate.h — making the tensors raw ops return: fresh contiguous outputs and
// views that share a base's storage. Neither records autograd history; the autograd layer
// wraps outputs with their grad_fn (see autograd/function.h).
// Read next: core/ops/elementwise.h.
#pragma once

#include "core/meta_allocations.h"
#include "core/tensor.h"

namespace kiln::ops {

/// A new contiguous tensor of uninitialised memory, recorded as the output of `op`.
Tensor empty_output(IntArrayRef sizes, DType dtype, Device device, const char* op);

/// A tensor over `base`'s storage with the given geometry (no bounds check: callers compute
/// geometries that stay inside the base). Recorded as a view made by `api`.
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides,
                 std::int64_t storage_offset, const char* api);

/// True when tensors on `device` hold data (false on the meta device, where raw ops stop
/// after computing the output's shape and dtype).
inline bool has_data(Device device) { return !device.is_meta(); }

/// True when an op whose kernels allocate scratch calls them on `device`: there is data, or
/// meta tensors stand for the CPU, whose kernels then allocate and compute nothing (the memory
/// planner, core/meta_allocations.h).
inline bool runs_kernels(Device device) { return has_data(device) || plans_cpu_kernels(device); }

}  // namespace kiln::ops
