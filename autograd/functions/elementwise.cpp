// autograd/functions/elementwise.cpp — differentiable elementwise ops: one Function per
// op, the forward on a raw op and the backward, with its math, right below it. Broadcasting
// is undone by sum_to; dtype differences from type promotion are undone by the engine.
// Read next: autograd/functions/reduce.cpp.
#include "autograd/functions/elementwise.h"

#include <cmath>
#include <numbers>

#include "autograd/function.h"
#include "autograd/functions/reduce.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

Tensor wrap(const Scalar& s) { return ops::wrapped_scalar(s); }

// --- unary --------------------------------------------------------------------------------------

struct NegFn : Function<NegFn> {
  static constexpr const char* name = "NegBackward0";
  static Tensor forward(Context<NegFn>&, const Tensor& x) { return ops::unary(UnaryOp::Neg, x); }
  // d(-x)/dx = -1
  static TensorList backward(Context<NegFn>&, const TensorList& g) { return {-g[0]}; }
};

struct ExpFn : Function<ExpFn> {
  static constexpr const char* name = "ExpBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  static Tensor forward(Context<ExpFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Exp, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d(e^x)/dx = e^x = y
  static TensorList backward(Context<ExpFn>& ctx, const TensorList& g) {
    return {g[0] * ctx.get_saved_variables()[0]};
  }
};

struct LogFn : Function<LogFn> {
  static constexpr const char* name = "LogBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  static Tensor forward(Context<LogFn>& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return ops::unary(UnaryOp::Log, x);
  }
  // d(log x)/dx = 1/x
  static TensorList backward(Context<LogFn>& ctx, const TensorList& g) {
    return {g[0] / ctx.get_saved_variables()[0]};
  }
};

struct SqrtFn : Function<SqrtFn> {
  static constexpr const char* name = "SqrtBackward0";
  static Tensor forward(Context<SqrtFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Sqrt, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d(sqrt x)/dx = 1 / (2 sqrt x)
  static TensorList backward(Context<SqrtFn>& ctx, const TensorList& g) {
    return {g[0] / (2 * ctx.get_saved_variables()[0])};
  }
};

struct RsqrtFn : Function<RsqrtFn> {
  static constexpr const char* name = "RsqrtBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  static Tensor forward(Context<RsqrtFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Rsqrt, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d(x^-1/2)/dx = -1/2 x^-3/2 = -y^3 / 2
  static TensorList backward(Context<RsqrtFn>& ctx, const TensorList& g) {
    const Tensor y = ctx.get_saved_variables()[0];
    return {g[0] * y * y * y * -0.5};
  }
};

struct AbsFn : Function<AbsFn> {
  static constexpr const char* name = "AbsBackward0";
  static Tensor forward(Context<AbsFn>& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return ops::unary(UnaryOp::Abs, x);
  }
  // d|x|/dx = sign(x) (0 at 0, PyTorch's choice)
  static TensorList backward(Context<AbsFn>& ctx, const TensorList& g) {
    return {g[0] * ctx.get_saved_variables()[0].sign()};
  }
};

struct SignFn : Function<SignFn> {
  static constexpr const char* name = "SignBackward0";
  static Tensor forward(Context<SignFn>&, const Tensor& x) { return ops::unary(UnaryOp::Sign, x); }
  // sign is piecewise constant: zero gradient everywhere it is defined
  static TensorList backward(Context<SignFn>&, const TensorList& g) { return {g[0] * 0}; }
};

/// PyTorch's threshold_backward(grad, output, 0): grad where relu's output is positive, else
/// 0, in one pass (a mask, its conversion and a product took three).
struct ThresholdBackwardFn : Function<ThresholdBackwardFn> {
  static constexpr const char* name = "ThresholdBackwardBackward0";
  static Tensor forward(Context<ThresholdBackwardFn>& ctx, const Tensor& grad, const Tensor& output) {
    ctx.save_for_backward({output});
    return ops::binary(BinaryOp::ThresholdBackward, grad, output);
  }
  // linear in grad, under the same mask; the mask is piecewise constant in the output: no gradient
  static TensorList backward(Context<ThresholdBackwardFn>& ctx, const TensorList& g) {
    return {ThresholdBackwardFn::apply(g[0], ctx.get_saved_variables()[0]), Tensor()};
  }
};

struct ReluFn : Function<ReluFn> {
  static constexpr const char* name = "ReluBackward0";
  static Tensor forward(Context<ReluFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Relu, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d relu(x)/dx = 1 where the output is positive, else 0
  static TensorList backward(Context<ReluFn>& ctx, const TensorList& g) {
    return {ThresholdBackwardFn::apply(g[0], ctx.get_saved_variables()[0])};
  }
};

struct SigmoidFn : Function<SigmoidFn> {
  static constexpr const char* name = "SigmoidBackward0";
  static Tensor forward(Context<SigmoidFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Sigmoid, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d sigma(x)/dx = sigma(x) (1 - sigma(x))
  static TensorList backward(Context<SigmoidFn>& ctx, const TensorList& g) {
    const Tensor y = ctx.get_saved_variables()[0];
    return {g[0] * y * (1 - y)};
  }
};

struct TanhFn : Function<TanhFn> {
  static constexpr const char* name = "TanhBackward0";
  static Tensor forward(Context<TanhFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Tanh, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d tanh(x)/dx = 1 - tanh(x)^2
  static TensorList backward(Context<TanhFn>& ctx, const TensorList& g) {
    const Tensor y = ctx.get_saved_variables()[0];
    return {g[0] * (1 - y * y)};
  }
};

// gelu_backward(grad, x) = grad · gelu'(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2 and
// phi(x) = exp(-x^2 / 2) / sqrt(2 pi):  d/dgrad = gelu'(x),  d/dx = grad · gelu''(x) with
// gelu''(x) = 2 phi(x) + x phi'(x) = phi(x) (2 - x^2) (PyTorch's gelu_double_backward).
struct GeluBackwardFn : Function<GeluBackwardFn> {
  static constexpr const char* name = "GeluBackwardBackward0";
  static Tensor forward(Context<GeluBackwardFn>& ctx, const Tensor& grad, const Tensor& x) {
    ctx.save_for_backward({grad, x});
    return ops::binary(BinaryOp::GeluBackward, grad, x);
  }
  static TensorList backward(Context<GeluBackwardFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    const Tensor &grad = s[0], &x = s[1];
    Tensor d_grad, d_x;
    if (ctx.needs_input_grad(0)) d_grad = GeluBackwardFn::apply(g[0], x);
    if (ctx.needs_input_grad(1)) {
      const Tensor pdf = (x * x * -0.5).exp() * (1.0 / std::sqrt(2.0 * std::numbers::pi));
      d_x = g[0] * grad * pdf * (2 - x * x);
    }
    return {d_grad, d_x};
  }
};

struct GeluFn : Function<GeluFn> {
  static constexpr const char* name = "GeluBackward0";
  static Tensor forward(Context<GeluFn>& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return ops::unary(UnaryOp::Gelu, x);
  }
  // gelu(x) = x Phi(x)  =>  gelu'(x) = Phi(x) + x phi(x), one fused pass (GeluBackwardFn).
  static TensorList backward(Context<GeluFn>& ctx, const TensorList& g) {
    return {GeluBackwardFn::apply(g[0], ctx.get_saved_variables()[0])};
  }
};

struct ErfFn : Function<ErfFn> {
  static constexpr const char* name = "ErfBackward0";
  static Tensor forward(Context<ErfFn>& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return ops::unary(UnaryOp::Erf, x);
  }
  // d erf(x)/dx = 2/sqrt(pi) exp(-x^2)
  static TensorList backward(Context<ErfFn>& ctx, const TensorList& g) {
    const Tensor x = ctx.get_saved_variables()[0];
    return {g[0] * (x * x * -1).exp() * (2.0 / std::sqrt(std::numbers::pi))};
  }
};

struct ReciprocalFn : Function<ReciprocalFn> {
  static constexpr const char* name = "ReciprocalBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  static Tensor forward(Context<ReciprocalFn>& ctx, const Tensor& x) {
    Tensor y = ops::unary(UnaryOp::Reciprocal, x);
    ctx.save_for_backward({y});
    return y;
  }
  // d(1/x)/dx = -1/x^2 = -y^2
  static TensorList backward(Context<ReciprocalFn>& ctx, const TensorList& g) {
    const Tensor y = ctx.get_saved_variables()[0];
    return {-g[0] * y * y};
  }
};

// --- binary -------------------------------------------------------------------------------------

struct AddFn : Function<AddFn> {
  static constexpr const char* name = "AddBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Promote;
  struct Saved { Shape a, b; Scalar alpha; };
  static Tensor forward(Context<AddFn>& ctx, const Tensor& a, const Tensor& b, const Scalar& alpha) {
    if (ctx.recording()) ctx.saved = {a.sizes().vec(), b.sizes().vec(), alpha};
    const bool unit = alpha.to_double() == 1.0;
    return ops::binary(BinaryOp::Add, a, unit ? b : ops::binary(BinaryOp::Mul, b, wrap(alpha)));
  }
  // d(a + alpha b)/da = 1, d/db = alpha; sum_to undoes broadcasting
  static TensorList backward(Context<AddFn>& ctx, const TensorList& g) {
    const auto& s = ctx.saved;
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = sum_to(g[0], s.a);
    if (ctx.needs_input_grad(1)) gb = sum_to(s.alpha.to_double() == 1.0 ? g[0] : g[0] * s.alpha, s.b);
    return {ga, gb};
  }
};

struct SubFn : Function<SubFn> {
  static constexpr const char* name = "SubBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Promote;
  struct Saved { Shape a, b; Scalar alpha; };
  static Tensor forward(Context<SubFn>& ctx, const Tensor& a, const Tensor& b, const Scalar& alpha) {
    if (ctx.recording()) ctx.saved = {a.sizes().vec(), b.sizes().vec(), alpha};
    const bool unit = alpha.to_double() == 1.0;
    return ops::binary(BinaryOp::Sub, a, unit ? b : ops::binary(BinaryOp::Mul, b, wrap(alpha)));
  }
  // d(a - alpha b)/da = 1, d/db = -alpha
  static TensorList backward(Context<SubFn>& ctx, const TensorList& g) {
    const auto& s = ctx.saved;
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = sum_to(g[0], s.a);
    if (ctx.needs_input_grad(1)) gb = sum_to(g[0] * (-s.alpha), s.b);
    return {ga, gb};
  }
};

struct MulFn : Function<MulFn> {
  static constexpr const char* name = "MulBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Promote;
  static Tensor forward(Context<MulFn>& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({a, b});
    return ops::binary(BinaryOp::Mul, a, b);
  }
  // d(ab)/da = b, d(ab)/db = a
  static TensorList backward(Context<MulFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = sum_to(g[0] * s[1], s[0].sizes());
    if (ctx.needs_input_grad(1)) gb = sum_to(g[0] * s[0], s[1].sizes());
    return {ga, gb};
  }
};

struct DivFn : Function<DivFn> {
  static constexpr const char* name = "DivBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Promote;
  static Tensor forward(Context<DivFn>& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({a, b});
    return ops::binary(BinaryOp::Div, a, b);
  }
  // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2
  static TensorList backward(Context<DivFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = sum_to(g[0] / s[1], s[0].sizes());
    if (ctx.needs_input_grad(1)) gb = sum_to(-g[0] * s[0] / (s[1] * s[1]), s[1].sizes());
    return {ga, gb};
  }
};

struct PowFn : Function<PowFn> {
  static constexpr const char* name = "PowBackward1";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  static Tensor forward(Context<PowFn>& ctx, const Tensor& base, const Tensor& exponent) {
    Tensor y = ops::binary(BinaryOp::Pow, base, exponent);
    ctx.save_for_backward({base, exponent, y});
    return y;
  }
  // d(a^b)/da = b a^(b-1)   (0 where b == 0, so 0^0 has no 0 * inf)
  // d(a^b)/db = a^b log a   (0 where a == 0 and b >= 0, PyTorch's convention)
  static TensorList backward(Context<PowFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    const Tensor &a = s[0], &b = s[1], &y = s[2];
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) {
      ga = sum_to(where(b == 0, 0.0, g[0] * b * a.pow(b - 1)), a.sizes());
    }
    if (ctx.needs_input_grad(1)) {
      gb = sum_to(where((a == 0) & (b >= 0), 0.0, g[0] * y * a.log()), b.sizes());
    }
    return {ga, gb};
  }
};

/// Ties send half the gradient each way, as PyTorch's maximum/minimum do.
template <bool IsMax>
struct ExtremumFn : Function<ExtremumFn<IsMax>> {
  static constexpr const char* name = IsMax ? "MaximumBackward0" : "MinimumBackward0";
  static Tensor forward(Context<ExtremumFn>& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({a, b});
    return ops::binary(IsMax ? BinaryOp::Maximum : BinaryOp::Minimum, a, b);
  }
  // d max(a,b)/da = 1 where a wins, 1/2 on ties, 0 where b wins (and mirror for b)
  static TensorList backward(Context<ExtremumFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    const Tensor &a = s[0], &b = s[1];
    const Tensor shared = where(a == b, g[0] / 2, g[0]);
    const Tensor a_wins = IsMax ? a > b : a < b;
    const Tensor b_wins = IsMax ? a < b : a > b;
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = sum_to(where(b_wins, 0.0, shared), a.sizes());
    if (ctx.needs_input_grad(1)) gb = sum_to(where(a_wins, 0.0, shared), b.sizes());
    return {ga, gb};
  }
};

struct WhereFn : Function<WhereFn> {
  static constexpr const char* name = "WhereBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Promote;
  struct Saved { Shape a, b; };
  static Tensor forward(Context<WhereFn>& ctx, const Tensor& cond, const Tensor& a, const Tensor& b) {
    ctx.saved = {a.sizes().vec(), b.sizes().vec()};
    ctx.save_for_backward({cond});
    return ops::where(cond, a, b);
  }
  // the gradient goes to whichever input was picked at each position
  static TensorList backward(Context<WhereFn>& ctx, const TensorList& g) {
    const Tensor cond = ctx.get_saved_variables()[0];
    Tensor ga, gb;
    if (ctx.needs_input_grad(1)) ga = sum_to(where(cond, g[0], 0.0), ctx.saved.a);
    if (ctx.needs_input_grad(2)) gb = sum_to(where(cond, 0.0, g[0]), ctx.saved.b);
    return {Tensor(), ga, gb};
  }
};

struct ClampFn : Function<ClampFn> {
  static constexpr const char* name = "ClampBackward1";
  struct Saved { std::optional<Scalar> min, max; };
  static Tensor forward(Context<ClampFn>& ctx, const Tensor& x, const std::optional<Scalar>& min,
                        const std::optional<Scalar>& max) {
    ctx.saved = {min, max};
    ctx.save_for_backward({x});
    return ops::clamp(x, min, max);
  }
  // 1 inside [min, max] (bounds included, as in PyTorch), 0 where clamped
  static TensorList backward(Context<ClampFn>& ctx, const TensorList& g) {
    const Tensor x = ctx.get_saved_variables()[0];
    Tensor inside = x == x;  // true except at NaN
    if (ctx.saved.min) inside = inside & (x >= *ctx.saved.min);
    if (ctx.saved.max) inside = inside & (x <= *ctx.saved.max);
    return {where(inside, g[0], 0.0)};
  }
};

}  // namespace

// --- free functions -------------------------------------------------------------------------------

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha) { return AddFn::apply(a, b, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha) { return SubFn::apply(a, b, alpha); }
Tensor mul(const Tensor& a, const Tensor& b) { return MulFn::apply(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return DivFn::apply(a, b); }
Tensor pow(const Tensor& base, const Tensor& exponent) { return PowFn::apply(base, exponent); }
Tensor pow(const Tensor& base, const Scalar& exponent) { return PowFn::apply(base, wrap(exponent)); }
Tensor maximum(const Tensor& a, const Tensor& b) { return ExtremumFn<true>::apply(a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return ExtremumFn<false>::apply(a, b); }
Tensor neg(const Tensor& x) { return NegFn::apply(x); }
Tensor exp(const Tensor& x) { return ExpFn::apply(x); }
Tensor log(const Tensor& x) { return LogFn::apply(x); }
Tensor sqrt(const Tensor& x) { return SqrtFn::apply(x); }
Tensor rsqrt(const Tensor& x) { return RsqrtFn::apply(x); }
Tensor abs(const Tensor& x) { return AbsFn::apply(x); }
Tensor sign(const Tensor& x) { return SignFn::apply(x); }
Tensor relu(const Tensor& x) { return ReluFn::apply(x); }
Tensor sigmoid(const Tensor& x) { return SigmoidFn::apply(x); }
Tensor tanh(const Tensor& x) { return TanhFn::apply(x); }
Tensor gelu(const Tensor& x) { return GeluFn::apply(x); }
Tensor leaky_relu(const Tensor& x, double negative_slope) { return where(x > 0, x, x * negative_slope); }
Tensor erf(const Tensor& x) { return ErfFn::apply(x); }
Tensor square(const Tensor& x) { return MulFn::apply(x, x); }
Tensor reciprocal(const Tensor& x) { return ReciprocalFn::apply(x); }
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  return ClampFn::apply(x, min, max);
}
Tensor logical_and(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::LogicalAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::LogicalOr, a, b); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::LogicalXor, a, b); }
Tensor logical_not(const Tensor& x) { return ops::logical_not(x); }
Tensor eq(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return ops::binary(BinaryOp::Ge, a, b); }

Tensor where(const Tensor& condition, const Tensor& input, const Tensor& other) {
  return WhereFn::apply(condition, input, other);
}
Tensor where(const Tensor& condition, const Scalar& input, const Tensor& other) {
  return WhereFn::apply(condition, wrap(input), other);
}
Tensor where(const Tensor& condition, const Tensor& input, const Scalar& other) {
  return WhereFn::apply(condition, input, wrap(other));
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  NoGradGuard no_grad;
  const Tensor close = (a - b).abs() <= atol + rtol * b.abs();
  // Equal values (including matching infinities) are close; NaN is close only to NaN, and only
  // with equal_nan (x != x holds exactly for NaN).
  if (equal_nan) return close | (a == b) | ((a != a) & (b != b));
  return close | (a == b);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  return isclose(a, b, rtol, atol, equal_nan).logical_not().sum().item<std::int64_t>() == 0;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  return (a != b).sum().item<std::int64_t>() == 0;
}

// --- Tensor methods -----------------------------------------------------------------------------

Tensor Tensor::where(const Tensor& condition, const Tensor& other) const {
  return kiln::where(condition, *this, other);
}
Tensor Tensor::where(const Tensor& condition, const Scalar& other) const {
  return kiln::where(condition, *this, other);
}
Tensor Tensor::isclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return kiln::isclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::allclose(const Tensor& other, double rtol, double atol, bool equal_nan) const {
  return kiln::allclose(*this, other, rtol, atol, equal_nan);
}
bool Tensor::equal(const Tensor& other) const { return kiln::equal(*this, other); }

Tensor Tensor::add(const Tensor& o, const Scalar& alpha) const { return AddFn::apply(*this, o, alpha); }
Tensor Tensor::add(const Scalar& o, const Scalar& alpha) const { return AddFn::apply(*this, wrap(o), alpha); }
Tensor Tensor::sub(const Tensor& o, const Scalar& alpha) const { return SubFn::apply(*this, o, alpha); }
Tensor Tensor::sub(const Scalar& o, const Scalar& alpha) const { return SubFn::apply(*this, wrap(o), alpha); }
Tensor Tensor::mul(const Tensor& o) const { return MulFn::apply(*this, o); }
Tensor Tensor::mul(const Scalar& o) const { return MulFn::apply(*this, wrap(o)); }
Tensor Tensor::div(const Tensor& o) const { return DivFn::apply(*this, o); }
Tensor Tensor::div(const Scalar& o) const { return DivFn::apply(*this, wrap(o)); }
Tensor Tensor::pow(const Tensor& e) const { return PowFn::apply(*this, e); }
Tensor Tensor::pow(const Scalar& e) const { return PowFn::apply(*this, wrap(e)); }
Tensor Tensor::maximum(const Tensor& o) const { return ExtremumFn<true>::apply(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return ExtremumFn<false>::apply(*this, o); }
Tensor Tensor::neg() const { return NegFn::apply(*this); }
Tensor Tensor::exp() const { return ExpFn::apply(*this); }
Tensor Tensor::log() const { return LogFn::apply(*this); }
Tensor Tensor::sqrt() const { return SqrtFn::apply(*this); }
Tensor Tensor::rsqrt() const { return RsqrtFn::apply(*this); }
Tensor Tensor::abs() const { return AbsFn::apply(*this); }
Tensor Tensor::sign() const { return SignFn::apply(*this); }
Tensor Tensor::relu() const { return ReluFn::apply(*this); }
Tensor Tensor::sigmoid() const { return SigmoidFn::apply(*this); }
Tensor Tensor::tanh() const { return TanhFn::apply(*this); }
Tensor Tensor::gelu() const { return GeluFn::apply(*this); }
Tensor Tensor::erf() const { return ErfFn::apply(*this); }
Tensor Tensor::square() const { return MulFn::apply(*this, *this); }
Tensor Tensor::reciprocal() const { return ReciprocalFn::apply(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ClampFn::apply(*this, min, max);
}
Tensor Tensor::clamp_min(const Scalar& min) const { return ClampFn::apply(*this, std::optional<Scalar>(min), std::optional<Scalar>()); }
Tensor Tensor::clamp_max(const Scalar& max) const { return ClampFn::apply(*this, std::optional<Scalar>(), std::optional<Scalar>(max)); }
Tensor Tensor::eq(const Tensor& o) const { return ops::binary(BinaryOp::Eq, *this, o); }
Tensor Tensor::eq(const Scalar& o) const { return ops::binary(BinaryOp::Eq, *this, wrap(o)); }
Tensor Tensor::ne(const Tensor& o) const { return ops::binary(BinaryOp::Ne, *this, o); }
Tensor Tensor::ne(const Scalar& o) const { return ops::binary(BinaryOp::Ne, *this, wrap(o)); }
Tensor Tensor::lt(const Tensor& o) const { return ops::binary(BinaryOp::Lt, *this, o); }
Tensor Tensor::lt(const Scalar& o) const { return ops::binary(BinaryOp::Lt, *this, wrap(o)); }
Tensor Tensor::le(const Tensor& o) const { return ops::binary(BinaryOp::Le, *this, o); }
Tensor Tensor::le(const Scalar& o) const { return ops::binary(BinaryOp::Le, *this, wrap(o)); }
Tensor Tensor::gt(const Tensor& o) const { return ops::binary(BinaryOp::Gt, *this, o); }
Tensor Tensor::gt(const Scalar& o) const { return ops::binary(BinaryOp::Gt, *this, wrap(o)); }
Tensor Tensor::ge(const Tensor& o) const { return ops::binary(BinaryOp::Ge, *this, o); }
Tensor Tensor::ge(const Scalar& o) const { return ops::binary(BinaryOp::Ge, *this, wrap(o)); }
Tensor Tensor::logical_and(const Tensor& o) const { return ops::binary(BinaryOp::LogicalAnd, *this, o); }
Tensor Tensor::logical_or(const Tensor& o) const { return ops::binary(BinaryOp::LogicalOr, *this, o); }
Tensor Tensor::logical_xor(const Tensor& o) const { return ops::binary(BinaryOp::LogicalXor, *this, o); }
Tensor Tensor::logical_not() const { return ops::logical_not(*this); }
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const {
  // The result keeps self's dtype (a bool mask filled with 0 stays bool; an integer tensor
  // filled with 2.5 gets 2), as PyTorch's: the value is cast first, not promoted with self.
  return WhereFn::apply(mask, wrap(value).to(dtype()), *this);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const {
  KILN_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got "
             "tensor with ", value.dim(), " dimension(s).");
  return WhereFn::apply(mask, value.to(dtype()), *this);
}

// --- operators ----------------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
Tensor operator+(const Tensor& a, const Scalar& b) { return a.add(b); }
Tensor operator+(const Scalar& a, const Tensor& b) { return b.add(a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
Tensor operator-(const Tensor& a, const Scalar& b) { return a.sub(b); }
Tensor operator-(const Scalar& a, const Tensor& b) { return SubFn::apply(wrap(a), b, Scalar(1)); }
Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
Tensor operator*(const Tensor& a, const Scalar& b) { return a.mul(b); }
Tensor operator*(const Scalar& a, const Tensor& b) { return b.mul(a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
Tensor operator/(const Tensor& a, const Scalar& b) { return a.div(b); }
Tensor operator/(const Scalar& a, const Tensor& b) { return DivFn::apply(wrap(a), b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator==(const Tensor& a, const Tensor& b) { return a.eq(b); }
Tensor operator==(const Tensor& a, const Scalar& b) { return a.eq(b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return a.ne(b); }
Tensor operator!=(const Tensor& a, const Scalar& b) { return a.ne(b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<(const Tensor& a, const Scalar& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator<=(const Tensor& a, const Scalar& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>(const Tensor& a, const Scalar& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator>=(const Tensor& a, const Scalar& b) { return a.ge(b); }

namespace {
void check_bool(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK_TYPE(a.dtype() == DType::Bool && b.dtype() == DType::Bool, "operator", op,
                  " is defined on Bool tensors in Kiln (got ", a.dtype(), " and ", b.dtype(),
                  "); use logical_and/logical_or/logical_xor for other dtypes");
}
}  // namespace

Tensor operator&(const Tensor& a, const Tensor& b) {
  check_bool("&", a, b);
  return a.logical_and(b);
}
Tensor operator|(const Tensor& a, const Tensor& b) {
  check_bool("|", a, b);
  return a.logical_or(b);
}
Tensor operator^(const Tensor& a, const Tensor& b) {
  check_bool("^", a, b);
  return a.logical_xor(b);
}
Tensor operator~(const Tensor& a) {
  KILN_CHECK_TYPE(a.dtype() == DType::Bool, "operator~ is defined on Bool tensors in Kiln (got ",
                  a.dtype(), "); use logical_not for other dtypes");
  return a.logical_not();
}

}  // namespace kiln
