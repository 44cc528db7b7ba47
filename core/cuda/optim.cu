// core/cuda/optim.cu — the fused optimizer and mixed-precision passes on the GPU: one Adam
// (or AdamW) update of param, exp_avg, exp_avg_sq in one kernel, and GradScaler's unscale
// with its inf/NaN check in one read of each gradient. The update rule is the CPU kernel's
// (core/cpu/adam.cpp), element for element.
// Read next: core/cuda/register.cpp.
#include "core/cuda/loops.cuh"

namespace kiln::cuda {

namespace {

struct AdamScalars {
  double b1, b2, eps, step_size, inv_sqrt_bc2, sign, decay, grad_decay;
  bool amsgrad;
};

/// Float math for float and half parameters, double for double (as OpMath on the CPU).
template <class T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, std::int64_t n, AdamScalars s) {
  using M = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const M b1 = static_cast<M>(s.b1), b2 = static_cast<M>(s.b2), eps = static_cast<M>(s.eps);
  const M step_size = static_cast<M>(s.step_size), inv_sqrt_bc2 = static_cast<M>(s.inv_sqrt_bc2);
  const M sign = static_cast<M>(s.sign), decay = static_cast<M>(s.decay), grad_decay = static_cast<M>(s.grad_decay);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const M pi = convert<M>(p[i]) * decay;
    const M gi = sign * convert<M>(g[i]) + grad_decay * pi;
    const M mi = b1 * convert<M>(m[i]) + (M(1) - b1) * gi;
    M vi = b2 * convert<M>(v[i]) + (M(1) - b2) * gi * gi;
    m[i] = convert<T>(mi);
    v[i] = convert<T>(vi);
    if (s.amsgrad) {
      const M seen = convert<M>(vmax[i]);
      vi = seen > vi ? seen : vi;
      vmax[i] = convert<T>(vi);
    }
    p[i] = convert<T>(pi - step_size * mi / (sqrt(vi) * inv_sqrt_bc2 + eps));
  }
}

template <class T>
__global__ void unscale_kernel(T* grad, std::int64_t n, float inv_scale, float* found_inf) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = convert<float>(grad[i]);
    bad |= !isfinite(x);
    grad[i] = convert<T>(x * inv_scale);
  }
  if (bad) *found_inf = 1.0f;  // a benign race: every writer writes 1
}

}  // namespace

bool launch_adam(DType dtype, char* param, const char* grad, char* exp_avg, char* exp_avg_sq, char* max_exp_avg_sq,
                 std::int64_t n, const AdamStep& step, StreamHandle stream) {
  if (n == 0) return true;
  const AdamScalars s{step.beta1,
                      step.beta2,
                      step.eps,
                      step.lr / step.bias_correction1,
                      1.0 / std::sqrt(step.bias_correction2),
                      step.maximize ? -1.0 : 1.0,
                      step.decoupled_weight_decay ? 1.0 - step.lr * step.weight_decay : 1.0,
                      step.decoupled_weight_decay ? 0.0 : step.weight_decay,
                      step.amsgrad};
  return dispatch<FloatTypes>(dtype, [&]<typename T>() {
    adam_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(
        reinterpret_cast<T*>(param), reinterpret_cast<const T*>(grad), reinterpret_cast<T*>(exp_avg),
        reinterpret_cast<T*>(exp_avg_sq), reinterpret_cast<T*>(max_exp_avg_sq), n, s);
    check_launch("adam_cuda");
  });
}

bool launch_unscale_and_check(DType dtype, char* grad, std::int64_t n, float inv_scale, float* found_inf,
                              StreamHandle stream) {
  if (n == 0) return true;
  return dispatch<FloatTypes>(dtype, [&]<typename T>() {
    unscale_kernel<T><<<blocks_for(n), kBlockSize, 0, as_stream(stream)>>>(reinterpret_cast<T*>(grad), n, inv_scale,
                                                                          found_inf);
    check_launch("unscale_cuda");
  });
}

}  // namespace kiln::cuda
