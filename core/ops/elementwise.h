// core/ops/elementwise.h — raw elementwise ops: validate devices, settle the dtype
// (result_type, plus each op's rule), broadcast, allocate, and call the kernel. No autograd:
// the differentiable versions in autograd/functions/ call these.
// Read next: core/ops/copy.h.
#pragma once

#include <optional>

#include "core/ops/functors.h"
#include "core/tensor.h"

namespace kiln::ops {

/// A 0-dim tensor holding a C++ number; takes part in type promotion as a "wrapped number"
/// (lowest priority), like a Python scalar in PyTorch.
Tensor wrapped_scalar(const Scalar& value);

/// The dtype a unary op produces for an input dtype (exp of Int64 is Float32, abs keeps it).
DType unary_result_dtype(UnaryOp op, DType input);

Tensor unary(UnaryOp op, const Tensor& x);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
/// self = op(self, other) in place (other broadcasts to self; the result must be castable to
/// self's dtype: "result type Float can't be cast to the desired output type Long").
void binary_(BinaryOp op, const Tensor& self, const Tensor& other);
Tensor logical_not(const Tensor& x);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max);

}  // namespace kiln::ops
