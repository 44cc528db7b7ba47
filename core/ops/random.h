// core/ops/random.h — raw in-place random fills (uniform_, normal_, random integers,
// bernoulli). The streams are described in Note [Random streams] (core/random.h).
#pragma once

#include "core/kernels.h"
#include "core/tensor.h"

namespace kiln::ops {

/// Fills `self` in place (a, b: from/to, mean/std, low/high, or p) and bumps its version.
void random_(const Tensor& self, RandomKind kind, double a, double b);
/// The same without bumping the version (for a factory's fresh output).
void random_data(const Tensor& self, RandomKind kind, double a, double b);

}  // namespace kiln::ops
