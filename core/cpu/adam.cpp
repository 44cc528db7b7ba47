// core/cpu/adam.cpp — the fused Adam/AdamW update: one pass over each parameter instead of
// the dozen elementwise passes (and temporaries) of the composite rule in optim/adam.cpp,
// which stays as the reference and the fallback for non-contiguous parameters. The
// arithmetic is PyTorch's arrangement: denom = sqrt(v) / sqrt(bc2) + eps, p -= lr / bc1 * m / denom.
// Read next: optim/adam.cpp.
#include <cmath>
#include <utility>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/dispatch.h"

namespace kiln::cpu {

void adam_kernel(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                 const Tensor& max_exp_avg_sq, const AdamStep& s) {
  dispatch_dtype<FloatingTypes>(param.dtype(), "adam_cpu", [&]<typename T>() {
    using M = OpMath<T>;
    T* p = param.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    T* m = exp_avg.data_ptr<T>();
    T* v = exp_avg_sq.data_ptr<T>();
    T* vmax = s.amsgrad ? max_exp_avg_sq.data_ptr<T>() : nullptr;
    const M b1 = static_cast<M>(s.beta1), b2 = static_cast<M>(s.beta2), eps = static_cast<M>(s.eps);
    const M step_size = static_cast<M>(s.lr / s.bias_correction1);
    const M inv_sqrt_bc2 = static_cast<M>(1.0 / std::sqrt(s.bias_correction2));
    // The options become arithmetic (a sign, a factor, a coefficient) instead of branches, so
    // the loop has no control flow and vectorises.
    const M sign = s.maximize ? M(-1) : M(1);
    const M decay = s.decoupled_weight_decay ? static_cast<M>(1.0 - s.lr * s.weight_decay) : M(1);
    const M grad_decay = s.decoupled_weight_decay ? M(0) : static_cast<M>(s.weight_decay);
    parallel_for(0, param.numel(), kGrainSize, [=](std::int64_t b, std::int64_t e) {
      T* __restrict__ pp = p;
      T* __restrict__ mp = m;
      T* __restrict__ vp = v;
      const T* __restrict__ gp = g;
      auto one = [&](std::int64_t i, M& second) {
        const M pi = static_cast<M>(pp[i]) * decay;
        const M gi = sign * static_cast<M>(gp[i]) + grad_decay * pi;
        const M mi = b1 * static_cast<M>(mp[i]) + (1 - b1) * gi;
        const M vi = b2 * static_cast<M>(vp[i]) + (1 - b2) * gi * gi;
        mp[i] = static_cast<T>(mi);
        vp[i] = static_cast<T>(vi);
        second = vi;
        return std::pair<M, M>(pi, mi);
      };
      if (vmax == nullptr) {
        for (std::int64_t i = b; i < e; ++i) {
          M second;
          const auto [pi, mi] = one(i, second);
          pp[i] = static_cast<T>(pi - step_size * mi / (std::sqrt(second) * inv_sqrt_bc2 + eps));
        }
      } else {
        T* __restrict__ xp = vmax;
        for (std::int64_t i = b; i < e; ++i) {
          M second;
          const auto [pi, mi] = one(i, second);
          second = std::max(static_cast<M>(xp[i]), second);
          xp[i] = static_cast<T>(second);
          pp[i] = static_cast<T>(pi - step_size * mi / (std::sqrt(second) * inv_sqrt_bc2 + eps));
        }
      }
    });
  });
}

}  // namespace kiln::cpu
