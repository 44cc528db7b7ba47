// core/type_promotion.h — PyTorch's result_type: the dtype an op computes in when its inputs
// differ. See Note [Type promotion].
// Read next: core/ops/elementwise.h.
#pragma once

#include <initializer_list>

#include "core/tensor.h"

namespace kiln {

// Note [Type promotion]
// ~~~~~~~~~~~~~~~~~~~~~
// Operands fall into three priority classes: tensors with at least one dimension, 0-dim
// tensors, and wrapped C++ numbers (x + 2.5). Within a class dtypes combine with
// promote_types. A lower class only matters when it is of a higher *category*
// (bool < integral < floating): int64_tensor + 2.5 is Float32 (the default dtype), but
// float16_tensor + 2.5 stays Float16 and float32_tensor + float64_0dim stays Float32. This is
// why `x * 0.5` never silently turns a Float32 model into Float64, and why the float64 trap
// in the reference articles comes from *creating* a Float64 tensor, not from arithmetic.

/// The dtype PyTorch's result_type gives these operands.
DType result_type(std::initializer_list<const Tensor*> operands);
inline DType result_type(const Tensor& a, const Tensor& b) { return result_type({&a, &b}); }

/// PyTorch's can_cast: false only when the cast would drop to a lower category
/// (floating -> integral, anything non-bool -> bool).
bool can_cast(DType from, DType to);

}  // namespace kiln
