// autograd/functions/triangular.h — triu and tril: the upper or lower triangle of the last two
// dims (batched over the rest), everything else zero. Causal attention masks are built on them.
//
//   kiln::tril(kiln::ones({3, 3}))      // [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
//
// Read next: autograd/functions/attention.h.
#pragma once

#include "core/tensor.h"

namespace kiln {

/// Elements on and above the `diagonal`-th diagonal of the last two dims (0: the main one,
/// positive: above it, negative: below it); the rest are zero. Gradient: the same mask.
Tensor triu(const Tensor& x, std::int64_t diagonal = 0);
/// Elements on and below the `diagonal`-th diagonal; the rest are zero.
Tensor tril(const Tensor& x, std::int64_t diagonal = 0);

}  // namespace kiln
