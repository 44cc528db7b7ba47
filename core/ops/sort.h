// core/ops/sort.h — the order of a tensor's elements along a dim: the index kernel behind
// sort, topk and kthvalue, which then gather their values (so their gradients come from
// gather's). Runs on the host: CUDA tensors are copied over and the indices copied back.
// Read next: autograd/functions/sort.cpp.
#pragma once

#include "core/tensor.h"

namespace kiln::ops {

/// Int64 indices that sort `x` along `dim` (stably; NaN is the largest value, as in PyTorch),
/// on x's device.
Tensor sort_indices(const Tensor& x, std::int64_t dim, bool descending);
/// Int64 indices [..., 1, ...] (size 1 at `dim`) of each slice's mode along `dim`: the most
/// frequent value, the smallest among equally frequent ones, at its last position (PyTorch's
/// CPU choice).
Tensor mode_indices(const Tensor& x, std::int64_t dim);

}  // namespace kiln::ops
