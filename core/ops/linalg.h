// core/ops/linalg.h — raw matrix products. mm and bmm are the primitives; matmul (with its
// 1-D and broadcasting cases) is composed from them in autograd/functions/linalg.cpp.
// Read next: core/cpu/gemm.cpp.
#pragma once

#include "core/tensor.h"

namespace kiln::ops {

/// [n, k] @ [k, m] -> [n, m]. "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)";
/// mixed dtypes: "expected m1 and m2 to have the same dtype, but got: float != double".
Tensor mm(const Tensor& a, const Tensor& b);
/// [B, n, k] @ [B, k, m] -> [B, n, m]. A batch dim of stride 0 (an expanded operand) is read
/// without being materialised.
Tensor bmm(const Tensor& a, const Tensor& b);
/// out = a @ b into an existing contiguous out [n, m] of a's dtype and device (torch.mm's
/// out=): a recurrence's per-step product without a fresh tensor per step.
void mm_out(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace kiln::ops
