// core/ops/allocate.h — making the tensors raw ops return: fresh contiguous outputs and
// views that share a base's storage. Neither records autograd history; the autograd layer
// wraps outputs with their grad_fn (see autograd/function.h).
// Read next: core/ops/elementwise.h.
#pragma once

#include "core/tensor.h"

namespace kiln::ops {

/// A new contiguous tensor of uninitialised memory, recorded as the output of `op`.
Tensor empty_output(IntArrayRef sizes, DType dtype, Device device, const char* op);

/// A tensor over `base`'s storage with the given geometry (no bounds check: callers compute
/// geometries that stay inside the base). Recorded as a view made by `api`.
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides,
                 std::int64_t storage_offset, const char* api);

/// True when tensors on `device` hold values an op may read on the host to validate them
/// (index bounds, an integer power's sign). Kernels need no such test: the meta device's
/// compute nothing (Note [The meta device is a backend] in core/meta/register.cpp).
inline bool has_data(Device device) { return !device.is_meta(); }

}  // namespace kiln::ops
