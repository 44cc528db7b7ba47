// core/cpu/sgd.cpp — the fused SGD update: one pass over each parameter (and its momentum
// buffer) instead of the three elementwise ops, each a pass of its own, of the composite rule
// in optim/sgd.cpp, which stays as the reference and the fallback for non-contiguous
// parameters. The arithmetic is that rule's, in the same order:
//   g = ±grad + wd·p;  buf = momentum·buf + (1 - dampening)·g (g itself on the first step);
//   g = nesterov ? g + momentum·buf : buf;  p = p - lr·g.
// Read next: optim/sgd.cpp.
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {

template <class T, bool Momentum, bool Nesterov, bool First>
void sgd_loop(T* __restrict__ p, const T* __restrict__ grad, T* __restrict__ buf, std::int64_t n, const SgdStep& s) {
  using M = OpMath<T>;
  const M sign = s.maximize ? M(-1) : M(1), decay = static_cast<M>(s.weight_decay);
  const M momentum = static_cast<M>(s.momentum), keep = static_cast<M>(1.0 - s.dampening);
  const M minus_lr = static_cast<M>(-s.lr);
  parallel_for(0, n, kGrainSize, [=](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const M pi = static_cast<M>(p[i]);
      M g = sign * static_cast<M>(grad[i]) + decay * pi;
      if constexpr (Momentum) {
        const M bi = First ? g : momentum * static_cast<M>(buf[i]) + keep * g;
        buf[i] = static_cast<T>(bi);
        g = Nesterov ? g + momentum * bi : bi;
      }
      p[i] = static_cast<T>(pi + minus_lr * g);
    }
  });
}

}  // namespace

void sgd_kernel(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s) {
  dispatch_dtype<FloatingTypes>(param.dtype(), "sgd_cpu", [&]<typename T>() {
    T* p = param.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    const std::int64_t n = param.numel();
    if (!momentum_buffer.defined()) return sgd_loop<T, false, false, false>(p, g, nullptr, n, s);
    T* buf = momentum_buffer.data_ptr<T>();
    if (s.first_step) {
      return s.nesterov ? sgd_loop<T, true, true, true>(p, g, buf, n, s) : sgd_loop<T, true, false, true>(p, g, buf, n, s);
    }
    return s.nesterov ? sgd_loop<T, true, true, false>(p, g, buf, n, s) : sgd_loop<T, true, false, false>(p, g, buf, n, s);
  });
}

}  // namespace kiln::cpu
