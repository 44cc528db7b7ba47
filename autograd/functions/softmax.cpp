// autograd/functions/softmax.cpp — softmax and log_softmax as one differentiable op each
// (PyTorch's SoftmaxBackward0 and LogSoftmaxBackward0), on the fused kernel where the device
// has one (Note [One pass per softmax row] in core/cpu/softmax.cpp) and composed from ops
// elsewhere. Both save their output, which is all the backward needs:
//   softmax:     y = exp(x - max) / Σ exp(x - max),   dx = y (g - Σ g y)
//   log_softmax: y = x - log Σ exp(x),                dx = g - exp(y) Σ g
// When backward is itself recorded (create_graph), it is written with differentiable ops on
// the saved output, whose own gradient runs through this node again.
// Read next: autograd/functions/attention.cpp (whose softmax is this one).
#include <cmath>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/float_math.h"
#include "core/ops/softmax.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

/// The same functions from ops, for devices without the fused kernel. The max is subtracted
/// so exp cannot overflow; log-softmax replaces an infinite max by 0 as logsumexp does.
Tensor composed_softmax(const Tensor& x, std::int64_t dim, bool log) {
  Tensor m = x.amax(dim, true);
  if (!log) {
    const Tensor e = (x - m).exp();
    return e / e.sum(dim, true);
  }
  m = where(m.abs() == INFINITY, 0.0, m);
  const Tensor shifted = x - m;
  return shifted - shifted.exp().sum(dim, true).log();
}

template <bool Log>
struct SoftmaxFn : Function<SoftmaxFn<Log>> {
  static constexpr const char* name = Log ? "LogSoftmaxBackward0" : "SoftmaxBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  struct Saved {
    std::int64_t dim = 0;
  };
  static Tensor forward(Context<SoftmaxFn>& ctx, const Tensor& x, std::int64_t dim) {
    Tensor y = ops::can_fuse_softmax(x) ? ops::softmax(x, dim, Log) : composed_softmax(x, dim, Log);
    ctx.saved.dim = dim;
    ctx.save_for_backward({y});
    return y;
  }
  static TensorList backward(Context<SoftmaxFn>& ctx, const TensorList& grads) {
    const Tensor y = ctx.get_saved_variables()[0];
    const Tensor& g = grads[0];
    const std::int64_t dim = ctx.saved.dim;
    if (!is_grad_enabled() && ops::can_fuse_softmax(y) && g.dtype() == y.dtype()) {
      return {ops::softmax_backward(g, y, dim, Log)};
    }
    if constexpr (Log) {
      return {g - y.exp() * g.sum(dim, true)};
    } else {
      return {y * (g - (g * y).sum(dim, true))};
    }
  }
};

template <bool Log>
Tensor softmax_of(const Tensor& self, std::int64_t dim) {
  return amp::run<amp::CastPolicy::Fp32>([dim](const Tensor& t) {
    const Tensor input = t.is_floating_point() ? t : t.to(default_dtype());
    return in_float_math(input, [&](const Tensor& x) { return SoftmaxFn<Log>::apply(x, dim); });
  }, self);
}

}  // namespace

Tensor Tensor::softmax(std::int64_t dim) const { return softmax_of<false>(*this, dim); }
Tensor Tensor::log_softmax(std::int64_t dim) const { return softmax_of<true>(*this, dim); }

}  // namespace kiln
