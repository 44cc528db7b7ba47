// core/ops/checks.h — argument checks shared by the raw ops, with PyTorch's messages.
// Read next: core/messages.h.
#pragma once

#include <initializer_list>
#include <utility>

#include "core/tensor.h"

namespace kiln::ops {

/// A named argument, so that messages can say which one is to blame.
using NamedArg = std::pair<const char*, const Tensor*>;

/// The device all arguments share. CPU 0-dim tensors (and wrapped C++ numbers) may join
/// tensors on any device, as in PyTorch; anything else mismatched throws "Expected all tensors
/// to be on the same device, but found at least two devices, ..." naming both culprits.
Device common_device(std::initializer_list<NamedArg> args);

/// Throws "<op>: expected a floating point tensor, but got Long" style errors.
void check_floating(const char* op, const Tensor& t, const char* arg = "input");

/// Throws unless `index` is an Int64 tensor (PyTorch: "index_select(): Expected dtype int64
/// for index").
void check_index_dtype(const char* op, const Tensor& index);

/// Throws "index 5 is out of bounds for dimension 0 with size 3" when any value of `index`
/// falls outside [-size, size) (negative values are rejected: PyTorch's index ops do too).
void check_index_range(const Tensor& index, std::int64_t dim, std::int64_t size);

}  // namespace kiln::ops
