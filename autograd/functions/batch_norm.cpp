// autograd/functions/batch_norm.cpp — batch normalisation as one op (NativeBatchNormBackward0)
// through the backend's batch-norm kernels: cuDNN on CUDA, where batch_norm takes this route
// in training; reference kernels on the CPU, where batch_norm stays a composite of reductions
// and elementwise ops (autograd/functions/nn.cpp) and this op is reached as native_batch_norm.
// The backward kernel is not written with differentiable ops, so with create_graph the
// backward computes the same formula from differentiable ops instead, recomputing the batch
// statistics from the input so that their dependence on it is part of the graph.
// Read next: core/ops/batch_norm.h.
#include "autograd/function.h"
#include "autograd/functions/batch_norm.h"
#include "autograd/functions/nn.h"
#include "core/creation.h"
#include "core/grad_mode.h"
#include "core/ops/batch_norm.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct BatchNormFn : Function<BatchNormFn> {
  static constexpr const char* name = "NativeBatchNormBackward0";
  struct Saved {
    double eps = 0.0;
  };
  static TensorList forward(Context<BatchNormFn>& ctx, const Tensor& input, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
    auto [out, save_mean, save_invstd] =
        ops::batch_norm_forward(input, weight, bias, running_mean, running_var, momentum, eps);
    ctx.saved.eps = eps;
    ctx.save_for_backward({input, weight, save_mean, save_invstd});
    return {out, save_mean, save_invstd};
  }
  // x̂ = (x - mean) invstd, y = x̂ w + b:
  //   dL/db = Σ dy,  dL/dw = Σ dy x̂,  dL/dx = w invstd (dy - dL/db / n - x̂ dL/dw / n)
  // (sums over every dim but the channel; n elements per channel). Running stats get none.
  static TensorList backward(Context<BatchNormFn>& ctx, const TensorList& grads) {
    const TensorList s = ctx.get_saved_variables();  // input, weight, save_mean, save_invstd
    const Tensor& x = s[0];
    const Tensor& w = s[1];
    if (!is_grad_enabled()) {
      auto [gx, gw, gb] = ops::batch_norm_backward(grads[0], x, w, s[2], s[3], ctx.saved.eps);
      return {gx, ctx.needs_input_grad(1) ? gw : Tensor(), ctx.needs_input_grad(2) ? gb : Tensor(), Tensor(),
              Tensor()};
    }
    Shape reduced{0}, stat(static_cast<std::size_t>(x.dim()), 1);
    stat[1] = x.sizes()[1];
    for (std::int64_t d = 2; d < x.dim(); ++d) reduced.push_back(d);
    const double n = static_cast<double>(x.numel() / x.sizes()[1]);
    const Tensor mean = x.mean(reduced, true);
    const Tensor invstd = (x.var(reduced, false, true) + ctx.saved.eps).rsqrt();
    const Tensor x_hat = (x - mean) * invstd;
    const Tensor& gy = grads[0];
    const Tensor gb = gy.sum(reduced, true);
    const Tensor gw = (gy * x_hat).sum(reduced, true);
    const Tensor scale = w.defined() ? w.reshape(stat) * invstd : invstd;
    const DType stats = s[2].dtype();  // Float32 for a half input
    return {scale * (gy - gb / n - x_hat * (gw / n)),
            ctx.needs_input_grad(1) ? gw.reshape({-1}).to(stats) : Tensor(),
            ctx.needs_input_grad(2) ? gb.reshape({-1}).to(stats) : Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                                     const Tensor& running_mean, const Tensor& running_var,
                                                     bool training, double momentum, double eps) {
  if (!training) {
    const TensorOptions stats = TensorOptions().dtype(input.dtype()).device(input.device());
    return {batch_norm(input, running_mean, running_var, weight, bias, false, momentum, eps), empty({0}, stats),
            empty({0}, stats)};
  }
  const TensorList r = BatchNormFn::apply(input, weight, bias, running_mean, running_var, momentum, eps);
  return {r[0], r[1].detach(), r[2].detach()};
}

}  // namespace kiln
