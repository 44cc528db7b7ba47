// core/cpu/batch_norm.cpp — the CPU's batch-norm kernels (BatchNormKernels in
// core/kernels.h), written with raw ops. batch_norm on the CPU keeps its composite graph;
// these give native_batch_norm, which always takes the kernel route, a reference to be
// gradchecked against here and compared with cuDNN on a GPU.
//   mean = E[x], var = E[(x - mean)^2], invstd = 1/sqrt(var + eps), x̂ = (x - mean) invstd
//   y = x̂ w + b
//   dL/db = Σ dy,  dL/dw = Σ dy x̂,  dL/dx = w invstd (dy - dL/db / n - x̂ dL/dw / n)
// (sums over every dim but the channel; n elements per channel).
// Read next: core/cuda/cudnn_batch_norm.cpp.
#include "core/cpu/cpu_kernels.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace kiln::cpu {

namespace {

struct ChannelLayout {
  Shape reduced;  // every dim but 1
  Shape stat;     // [1, C, 1, ...]: a per-channel value broadcast over the input
  double count;   // elements per channel
};

ChannelLayout channel_layout(const Tensor& input) {
  ChannelLayout l{{0}, Shape(static_cast<std::size_t>(input.dim()), 1), 0.0};
  l.stat[1] = input.sizes()[1];
  for (std::int64_t d = 2; d < input.dim(); ++d) l.reduced.push_back(d);
  l.count = static_cast<double>(input.numel() / input.sizes()[1]);
  return l;
}

Tensor mul(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Mul, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Sub, a, b); }
Tensor add(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Add, a, b); }
Tensor times(const Tensor& a, double v) { return mul(a, ops::wrapped_scalar(v)); }

}  // namespace

void batch_norm_forward_kernel(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                               const Tensor& input, const Tensor& weight, const Tensor& bias,
                               const Tensor& running_mean, const Tensor& running_var, double momentum, double eps) {
  const ChannelLayout l = channel_layout(input);
  // Both statistics in one two-pass kernel, each rounded once (Note [var in two passes]).
  const auto [var, mean] = ops::var_mean(input, l.reduced, /*correction=*/0, /*keepdim=*/true);
  const Tensor centred = sub(input, mean);
  const Tensor invstd = ops::unary(UnaryOp::Rsqrt, add(var, ops::wrapped_scalar(eps)));
  ops::copy_data(out, add(mul(centred, mul(invstd, ops::view(weight, l.stat))), ops::view(bias, l.stat)));
  const std::int64_t channels = input.sizes()[1];
  ops::copy_data(save_mean, ops::view(mean, {channels}));
  ops::copy_data(save_invstd, ops::view(invstd, {channels}));
  if (running_mean.defined()) {
    ops::copy_data(running_mean, add(times(running_mean, 1 - momentum), times(ops::view(mean, {channels}), momentum)));
  }
  if (running_var.defined()) {
    const double unbias = l.count / std::max(l.count - 1, 1.0);
    ops::copy_data(running_var,
                   add(times(running_var, 1 - momentum), times(ops::view(var, {channels}), momentum * unbias)));
  }
}

void batch_norm_backward_kernel(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                                const Tensor& save_mean, const Tensor& save_invstd, double /*eps*/) {
  const ChannelLayout l = channel_layout(input);
  const Tensor invstd = ops::view(save_invstd, l.stat);
  const Tensor x_hat = mul(sub(input, ops::view(save_mean, l.stat)), invstd);
  const Tensor gb = ops::sum(grad_output, l.reduced, true);
  const Tensor gw = ops::sum(mul(grad_output, x_hat), l.reduced, true);
  const Tensor centred_grad =
      sub(sub(grad_output, times(gb, 1.0 / l.count)), mul(x_hat, times(gw, 1.0 / l.count)));
  ops::copy_data(grad_input, mul(mul(ops::view(weight, l.stat), invstd), centred_grad));
  const std::int64_t channels = input.sizes()[1];
  ops::copy_data(grad_weight, ops::view(gw, {channels}));
  ops::copy_data(grad_bias, ops::view(gb, {channels}));
}

}  // namespace kiln::cpu
