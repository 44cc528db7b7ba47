// core/ops/copy.h — raw copies: dtype conversion, device transfer, contiguous(), clone(),
// copy_() and fill_(). Each says whether it copies: to_dtype/to_device/contiguous return
// their input unchanged when no term changes; clone always copies.
// Read next: core/ops/reduce.h.
#pragma once

#include "core/tensor.h"

namespace kiln::ops {

/// `x` itself when it already has `dtype`, else a converted contiguous copy.
Tensor to_dtype(const Tensor& x, DType dtype);
/// `x` itself when already on `device`, else a copy there (see copy_ for non_blocking).
Tensor to_device(const Tensor& x, Device device, bool non_blocking);
/// `x` itself when contiguous, else a contiguous copy.
Tensor contiguous(const Tensor& x);
/// A contiguous copy with new memory, same dtype and device.
Tensor clone(const Tensor& x);
/// Copies src into dst: broadcasting src to dst's shape, converting its dtype, crossing
/// devices. non_blocking matters only for host<->device copies from/to pinned memory.
void copy_(const Tensor& dst, const Tensor& src, bool non_blocking = false);
void fill_(const Tensor& dst, const Scalar& value);

/// copy_ and fill_ without bumping the version counter: for filling a tensor nobody has seen
/// yet (a factory's output), which is creation, not modification.
void copy_data(const Tensor& dst, const Tensor& src, bool non_blocking = false);
void fill_data(const Tensor& dst, const Scalar& value);

/// Throws when writing to `t` would write one memory location twice (an expanded tensor):
/// "unsupported operation: more than one element of the written-to tensor refers to a single
/// memory location. Please clone() the tensor before performing the operation."
void check_no_internal_overlap(const Tensor& t);

}  // namespace kiln::ops
