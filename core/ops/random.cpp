// core/ops/random.cpp — raw random fills.
#include "core/ops/random.h"

#include "core/ops/allocate.h"
#include "core/ops/copy.h"

namespace kiln::ops {

void random_(const Tensor& self, RandomKind kind, double a, double b) {
  check_no_internal_overlap(self);
  random_data(self, kind, a, b);
  self.impl()->storage()->bump_version();
}

void random_data(const Tensor& self, RandomKind kind, double a, double b) {
  switch (kind) {
    case RandomKind::Uniform:
      KILN_CHECK(a <= b, "uniform_ expects to return a [from, to) range, but found from=", a,
                 " > to=", b);
      break;
    case RandomKind::Normal:
      KILN_CHECK(b >= 0.0, "normal expects std >= 0.0, but found std ", b);
      break;
    case RandomKind::IntRange:
      KILN_CHECK(a < b, "random_ expects 'from' to be less than 'to', but got from=", a,
                 " >= to=", b);
      break;
    case RandomKind::Bernoulli:
      KILN_CHECK(a >= 0.0 && a <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", a);
      break;
  }
  if (self.numel() == 0) return;
  const auto kernel = require_kernel(kernels_for(self.device().type()).random, "random_", self.device());
  if (self.is_contiguous()) {
    kernel(self, kind, a, b);
    return;
  }
  // Draw in element order into a contiguous buffer, then scatter into the strided tensor.
  Tensor staged = empty_output(self.sizes(), self.dtype(), self.device(), "random_");
  kernel(staged, kind, a, b);
  kernels_for(self.device().type()).copy(self, staged);
}

}  // namespace kiln::ops
