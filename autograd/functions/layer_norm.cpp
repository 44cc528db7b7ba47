// autograd/functions/layer_norm.cpp — layer normalisation over the trailing normalized_shape
// dims: one op (PyTorch's NativeLayerNormBackward0) on the fused kernel where the device has
// one (Note [One pass per layer-norm row] in core/cpu/layer_norm.cpp), composed from
// differentiable ops elsewhere (CUDA, half weights under no autocast). The statistics are in
// Float32 at least (Note [Autocast policies]). With create_graph, the backward computes the
// kernel's formula from differentiable ops, recomputing the statistics from the input so that
// their dependence on it is part of the graph.
// Read next: core/ops/layer_norm.h.
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/float_math.h"
#include "autograd/functions/layer_norm.h"
#include "core/grad_mode.h"
#include "core/ops/layer_norm.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct LayerNormFn : Function<LayerNormFn> {
  static constexpr const char* name = "NativeLayerNormBackward0";
  struct Saved {
    std::int64_t normalized_dims = 0;
    double eps = 0.0;
  };
  static Tensor forward(Context<LayerNormFn>& ctx, const Tensor& input, const Tensor& weight, const Tensor& bias,
                        std::int64_t normalized_dims, std::int64_t normalized, double eps) {
    auto [out, mean, rstd] = ops::native_layer_norm(input, normalized, weight, bias, eps);
    ctx.saved = {normalized_dims, eps};
    ctx.save_for_backward({input, weight, bias, mean, rstd});
    return out;
  }
  // x̂ = (x - mean) rstd per row, a = dy w:
  //   dx = rstd (a - mean(a) - x̂ mean(a x̂)),  dw = Σ_rows dy x̂,  db = Σ_rows dy
  static TensorList backward(Context<LayerNormFn>& ctx, const TensorList& grads) {
    const TensorList s = ctx.get_saved_variables();  // input, weight, bias, mean, rstd
    const Tensor &x = s[0], &w = s[1], &b = s[2];
    const Tensor& g = grads[0];
    if (!is_grad_enabled() && g.dtype() == x.dtype()) {
      auto [gx, gw, gb] = ops::native_layer_norm_backward(
          g, x, s[3], s[4], w, b, {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)});
      return {gx, gw, gb};
    }
    Shape rows, normalized;
    for (std::int64_t d = 0; d < x.dim(); ++d) (d < x.dim() - ctx.saved.normalized_dims ? rows : normalized).push_back(d);
    const Tensor centred = x - x.mean(normalized, true);
    const Tensor rstd = ((centred * centred).mean(normalized, true) + ctx.saved.eps).rsqrt();
    const Tensor x_hat = centred * rstd;
    const Tensor a = w.defined() ? g * w : g;
    auto over_rows = [&](const Tensor& t) { return rows.empty() ? t : t.sum(rows); };
    return {rstd * (a - a.mean(normalized, true) - x_hat * (a * x_hat).mean(normalized, true)),
            w.defined() && ctx.needs_input_grad(1) ? over_rows(g * x_hat) : Tensor(),
            b.defined() && ctx.needs_input_grad(2) ? over_rows(g) : Tensor()};
  }
};

Tensor layer_norm_impl(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias,
                       double eps) {
  const auto n = static_cast<std::int64_t>(normalized_shape.size());
  bool matches = input.dim() >= n;
  for (std::int64_t i = 0; matches && i < n; ++i) {
    matches = input.sizes()[input.dim() - n + i] == normalized_shape[static_cast<std::size_t>(i)];
  }
  if (!matches) {
    std::string inner;
    for (auto s : normalized_shape) inner += ", " + std::to_string(s);
    KILN_FAIL("Given normalized_shape=", normalized_shape, ", expected input with shape [*", inner,
              "], but got input of size", input.sizes());
  }
  KILN_CHECK(!weight.defined() || weight.sizes() == normalized_shape,
             "Expected weight to be of same shape as normalized_shape, but got weight of shape ", weight.sizes(),
             " and normalized_shape = ", normalized_shape);
  KILN_CHECK(!bias.defined() || bias.sizes() == normalized_shape,
             "Expected bias to be of same shape as normalized_shape, but got bias of shape ", bias.sizes(),
             " and normalized_shape = ", normalized_shape);
  std::int64_t elements = 1;
  for (auto s : normalized_shape) elements *= s;
  if (ops::can_fuse_layer_norm(input, elements, weight, bias)) {
    return LayerNormFn::apply(input, weight, bias, n, elements, eps);
  }
  Shape dims;
  for (std::int64_t d = input.dim() - n; d < input.dim(); ++d) dims.push_back(d);
  Tensor out = in_float_math(input, [&](const Tensor& x) {
    return (x - x.mean(dims, true)) / (x.var(dims, false, true) + eps).sqrt();
  });
  if (weight.defined()) out = out * weight;
  if (bias.defined()) out = out + bias;
  return out;
}

}  // namespace

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return amp::run<amp::CastPolicy::Fp32>(layer_norm_impl, input, normalized_shape, weight, bias, eps);
}

}  // namespace kiln
