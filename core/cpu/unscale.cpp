// core/cpu/unscale.cpp — GradScaler's pass on the CPU: one read of each gradient that both
// unscales it and notes whether any element was inf or NaN (a separate isfinite() pass would
// read every gradient twice).
// Read next: amp/grad_scaler.h.
#include <cmath>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/dispatch.h"

namespace kiln::cpu {

void unscale_kernel(const Tensor& grad, double inv_scale, const Tensor& found_inf) {
  dispatch_dtype<FloatingTypes>(grad.dtype(), "_amp_foreach_non_finite_check_and_unscale_cpu", [&]<typename T>() {
    using M = OpMath<T>;
    T* g = grad.data_ptr<T>();
    const M scale = static_cast<M>(inv_scale);
    int bad = 0;
    const std::int64_t n = grad.numel();
#pragma omp parallel for reduction(| : bad) if (n > kGrainSize && !omp_in_parallel())
    for (std::int64_t i = 0; i < n; ++i) {
      const M x = static_cast<M>(g[i]);
      bad |= !std::isfinite(x);
      g[i] = static_cast<T>(x * scale);
    }
    if (bad != 0) found_inf.data_ptr<float>()[0] = 1.0f;
  });
}

}  // namespace kiln::cpu
