// autograd/functions/reduce.cpp — differentiable reductions. sum, mean, var, prod, amax/amin,
// max/min along a dim and the 2-norm are Functions; std and logsumexp are composites of them
// and get their gradients for free (softmax and log_softmax are ops of their own:
// autograd/functions/softmax.cpp).
// Read next: autograd/functions/linalg.cpp.
#include "autograd/functions/reduce.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions/float_math.h"
#include "core/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

/// Re-inserts the reduced dims (size 1) so a keepdim=false result broadcasts against the input.
Tensor unsqueeze_reduced(const Tensor& t, IntArrayRef input_sizes, IntArrayRef wrapped_dims,
                         bool keepdim) {
  if (keepdim) return t;
  return t.reshape(ops::reduced_shape(input_sizes, wrapped_dims, true));
}

struct SumFn : Function<SumFn> {
  static constexpr const char* name = "SumBackward1";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  struct Saved { Shape sizes, dims; bool keepdim; };
  static Tensor forward(Context<SumFn>& ctx, const Tensor& x, IntArrayRef dims, bool keepdim,
                        std::optional<DType> dtype) {
    ctx.saved = {x.sizes().vec(), wrap_dims(dims, x.dim()), keepdim};
    return ops::sum(x, dims, keepdim, dtype);
  }
  // d(sum x)/dx_i = 1: the gradient is broadcast back over the reduced dims
  static TensorList backward(Context<SumFn>& ctx, const TensorList& g) {
    const auto& s = ctx.saved;
    return {unsqueeze_reduced(g[0], s.sizes, s.dims, s.keepdim).expand(s.sizes)};
  }
};

std::int64_t reduced_numel(const Tensor& x, IntArrayRef dims) {
  std::int64_t n = 1;
  for (auto d : wrap_dims(dims, x.dim())) n *= x.sizes()[d];
  return n;
}

// mean = Σx / n, divided before it is rounded (ops::mean), so it rounds once.
struct MeanFn : Function<MeanFn> {
  static constexpr const char* name = "MeanBackward1";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  struct Saved { Shape sizes, dims; bool keepdim; double n; };
  static Tensor forward(Context<MeanFn>& ctx, const Tensor& x, IntArrayRef dims, bool keepdim,
                        std::optional<DType> dtype) {
    const auto n = static_cast<double>(reduced_numel(x, dims));
    ctx.saved = {x.sizes().vec(), wrap_dims(dims, x.dim()), keepdim, n};
    return ops::mean(x, dims, keepdim, n, dtype);
  }
  // d(Σx / n)/dx_i = 1/n: the gradient, divided by n, broadcast back over the reduced dims
  static TensorList backward(Context<MeanFn>& ctx, const TensorList& g) {
    const auto& s = ctx.saved;
    return {unsqueeze_reduced(g[0] / s.n, s.sizes, s.dims, s.keepdim).expand(s.sizes)};
  }
};

// var = Σ (x - mean)² / (n - correction), in two passes over x and rounded once (Note [var
// in two passes] in core/cpu/reduce.cpp).
struct VarFn : Function<VarFn> {
  static constexpr const char* name = "VarBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  struct Saved { Shape dims; bool keepdim; double divisor; };
  static Tensor forward(Context<VarFn>& ctx, const Tensor& x, IntArrayRef dims, std::int64_t correction,
                        bool keepdim) {
    const std::int64_t n = reduced_numel(x, dims);
    ctx.saved = {wrap_dims(dims, x.dim()), keepdim, static_cast<double>(std::max<std::int64_t>(n - correction, 0))};
    ctx.save_for_backward({x});
    return std::get<0>(ops::var_mean(x, dims, correction, keepdim, /*with_mean=*/false));
  }
  // d var/dx_i = 2 (x_i - mean) / (n - correction): the mean's own dependence on x_i drops
  // out, since the deviations sum to zero
  static TensorList backward(Context<VarFn>& ctx, const TensorList& g) {
    const Tensor x = ctx.get_saved_variables()[0];
    const auto& s = ctx.saved;
    const Tensor grad = unsqueeze_reduced(g[0], x.sizes(), s.dims, s.keepdim);
    return {grad * (x - x.mean(s.dims, true)) * (2.0 / s.divisor)};
  }
};

struct ProdFn : Function<ProdFn> {
  static constexpr const char* name = "ProdBackward1";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  struct Saved { Shape dims; bool keepdim; };
  static Tensor forward(Context<ProdFn>& ctx, const Tensor& x, IntArrayRef dims, bool keepdim,
                        std::optional<DType> dtype) {
    ctx.saved = {wrap_dims(dims, x.dim()), keepdim};
    ctx.save_for_backward({x});
    return ops::prod(x, dims, keepdim, dtype);
  }
  // d(prod x)/dx_i = prod_{j != i} x_j. Dividing the product by x_i fails at zeros, so per
  // slice, with P = the product of the nonzero elements:
  //   no zero:        P / x_i
  //   one zero (x_k): P at k; 0 elsewhere, written as x_k * P / x_i so that its own
  //                   derivative with respect to x_k (P / x_i) is right for double backward
  //   two or more:    0 (first derivative exact; its derivative is not: a known limit)
  static TensorList backward(Context<ProdFn>& ctx, const TensorList& g) {
    const Tensor x = ctx.get_saved_variables()[0];
    const auto& s = ctx.saved;
    const Tensor grad = unsqueeze_reduced(g[0], x.sizes(), s.dims, s.keepdim);
    const Tensor is_zero = x == 0;
    const Tensor nonzero = where(is_zero, 1.0, x);
    const Tensor p = ProdFn::apply(nonzero, IntArrayRef(s.dims), true, std::optional<DType>());
    const Tensor zeros_count = is_zero.sum(s.dims, true);
    const Tensor the_zero = (x * is_zero).sum(s.dims, true);  // value 0, derivative 1 at x_k
    const Tensor one_zero = where(is_zero, p, the_zero * p / nonzero);
    const Tensor others = where(zeros_count == 0, p / nonzero, where(zeros_count == 1, one_zero, 0.0));
    return {grad * others};
  }
};

// amax, amin and the 2-norm: reductions whose backward compares each input element with the
// result. Their forward saves the input, the result and the reduced dims; their backward starts
// from the result and the gradient put back into the input's shape.
struct ReducedDims { Shape dims; bool keepdim; };

/// Records `dims` (wrapped) and `keepdim`, runs `reduce`, and saves `x` and the result.
template <class Fn, class Reduce>
Tensor reduce_saving_result(Context<Fn>& ctx, const Tensor& x, IntArrayRef dims, bool keepdim, const Reduce& reduce) {
  ctx.saved = {wrap_dims(dims, x.dim()), keepdim};
  Tensor y = reduce();
  ctx.save_for_backward({x, y});
  return y;
}

/// The saved input, and the saved result and the incoming gradient with the reduced dims put
/// back, so that both broadcast against the input.
struct Unreduced { Tensor x, y, grad; };
template <class Fn>
Unreduced unreduced(Context<Fn>& ctx, const TensorList& g) {
  const TensorList s = ctx.get_saved_variables();
  const ReducedDims& d = ctx.saved;
  return {s[0], unsqueeze_reduced(s[1], s[0].sizes(), d.dims, d.keepdim),
          unsqueeze_reduced(g[0], s[0].sizes(), d.dims, d.keepdim)};
}

template <bool IsMax>
struct AmaxFn : Function<AmaxFn<IsMax>> {
  static constexpr const char* name = IsMax ? "AmaxBackward0" : "AminBackward0";
  using Saved = ReducedDims;
  static Tensor forward(Context<AmaxFn>& ctx, const Tensor& x, IntArrayRef dims, bool keepdim) {
    return reduce_saving_result(ctx, x, dims, keepdim,
                                [&] { return IsMax ? ops::amax(x, dims, keepdim) : ops::amin(x, dims, keepdim); });
  }
  // the gradient is shared evenly between all elements equal to the extreme
  static TensorList backward(Context<AmaxFn>& ctx, const TensorList& g) {
    const auto [x, y, grad] = unreduced(ctx, g);
    const Tensor mask = x == y;
    return {grad * mask / mask.sum(ctx.saved.dims, true)};
  }
};

template <bool IsMax>
struct MaxDimFn : Function<MaxDimFn<IsMax>> {
  static constexpr const char* name = IsMax ? "MaxBackward0" : "MinBackward0";
  struct Saved { Shape sizes; std::int64_t dim; bool keepdim; };
  static TensorList forward(Context<MaxDimFn>& ctx, const Tensor& x, std::int64_t dim, bool keepdim) {
    const std::int64_t d = wrap_dim(dim, x.dim());
    ctx.saved = {x.sizes().vec(), d, keepdim};
    auto [values, indices] = IsMax ? ops::max_dim(x, d, keepdim) : ops::min_dim(x, d, keepdim);
    ctx.save_for_backward({indices});
    return {values, indices};
  }
  // the gradient goes to the one index that was picked
  static TensorList backward(Context<MaxDimFn>& ctx, const TensorList& g) {
    const auto& s = ctx.saved;
    const Tensor idx = ctx.get_saved_variables()[0];
    if (s.sizes.empty()) return {g[0]};
    const Tensor grad = s.keepdim ? g[0] : g[0].unsqueeze(s.dim);
    const Tensor index = s.keepdim ? idx : idx.unsqueeze(s.dim);
    return {zeros(s.sizes, g[0].options()).scatter(s.dim, index, grad)};
  }
};

struct Norm2Fn : Function<Norm2Fn> {
  static constexpr const char* name = "NormBackward1";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Fp32;
  using Saved = ReducedDims;
  static Tensor forward(Context<Norm2Fn>& ctx, const Tensor& x, IntArrayRef dims, bool keepdim) {
    return reduce_saving_result(ctx, x, dims, keepdim, [&] {
      return ops::unary(UnaryOp::Sqrt, ops::sum(ops::binary(BinaryOp::Mul, x, x), dims, keepdim));
    });
  }
  // d ||x||/dx = x / ||x||, taken as 0 where the norm is 0 (PyTorch's subgradient)
  static TensorList backward(Context<Norm2Fn>& ctx, const TensorList& g) {
    const auto [x, y, grad] = unreduced(ctx, g);
    return {where(y == 0, 0.0, grad * x / y)};
  }
};

}  // namespace

Tensor sum_to(const Tensor& grad, IntArrayRef shape) {
  if (grad.sizes() == shape) return grad;
  const std::int64_t lead = grad.dim() - static_cast<std::int64_t>(shape.size());
  KILN_CHECK(lead >= 0, "sum_to: cannot sum a tensor of shape ", grad.sizes(), " to ", shape);
  Shape dims;
  for (std::int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::int64_t d = lead + static_cast<std::int64_t>(i);
    if (shape[i] == 1 && grad.sizes()[d] != 1) dims.push_back(d);
  }
  if (dims.empty()) return grad.reshape(shape);
  return grad.sum(dims, true).reshape(shape);
}

StdMean std_mean(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return {x.std(dims, unbiased, keepdim), x.mean(dims, keepdim)};
}

VarMean var_mean(const Tensor& x, IntArrayRef dims, bool unbiased, bool keepdim) {
  return {x.var(dims, unbiased, keepdim), x.mean(dims, keepdim)};
}

// --- Tensor methods -----------------------------------------------------------------------------

Tensor Tensor::sum(std::optional<DType> dtype) const { return SumFn::apply(*this, IntArrayRef{}, false, dtype); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, std::optional<DType> dtype) const {
  return SumFn::apply(*this, dims, keepdim, dtype);
}

Tensor Tensor::mean(std::optional<DType> dtype) const { return mean({}, false, dtype); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim, std::optional<DType> dtype) const {
  const DType t = dtype.value_or(this->dtype());
  KILN_CHECK_TYPE(kiln::is_floating_point(t), "mean(): could not infer output dtype. Input dtype must be "
                  "either a floating point or complex dtype. Got: ", scalar_type_name(t));
  return MeanFn::apply(*this, dims, keepdim, dtype);
}

Tensor Tensor::prod(std::optional<DType> dtype) const { return ProdFn::apply(*this, IntArrayRef{}, false, dtype); }
Tensor Tensor::prod(IntArrayRef dims, bool keepdim, std::optional<DType> dtype) const {
  KILN_CHECK_VALUE(!dims.empty(), "prod(): expected at least one dim (prod() without dims reduces everything)");
  return ProdFn::apply(*this, dims, keepdim, dtype);
}

Tensor Tensor::max() const { return AmaxFn<true>::apply(*this, IntArrayRef{}, false); }
Tensor Tensor::min() const { return AmaxFn<false>::apply(*this, IntArrayRef{}, false); }
ValuesIndices Tensor::max(std::int64_t dim, bool keepdim) const {
  TensorList r = MaxDimFn<true>::apply(*this, dim, keepdim);
  return {r[0], r[1]};
}
ValuesIndices Tensor::min(std::int64_t dim, bool keepdim) const {
  TensorList r = MaxDimFn<false>::apply(*this, dim, keepdim);
  return {r[0], r[1]};
}
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const { return AmaxFn<true>::apply(*this, dims, keepdim); }
Tensor Tensor::amin(IntArrayRef dims, bool keepdim) const { return AmaxFn<false>::apply(*this, dims, keepdim); }
Tensor Tensor::argmax(std::optional<std::int64_t> dim, bool keepdim) const { return ops::argmax(*this, dim, keepdim); }
Tensor Tensor::argmin(std::optional<std::int64_t> dim, bool keepdim) const { return ops::argmin(*this, dim, keepdim); }

// all/any count the zeros (nonzeros) as Int64 sums: no gradient, any dtype, any device.
Tensor Tensor::all() const { return (*this == 0).sum() == 0; }
Tensor Tensor::all(std::int64_t dim, bool keepdim) const { return (*this == 0).sum(dim, keepdim) == 0; }
Tensor Tensor::any() const { return (*this != 0).sum() > 0; }
Tensor Tensor::any(std::int64_t dim, bool keepdim) const { return (*this != 0).sum(dim, keepdim) > 0; }

Tensor Tensor::var(IntArrayRef dims, bool unbiased, bool keepdim) const {
  KILN_CHECK_TYPE(is_floating_point(), "var(): input dtype should be floating point, but got ",
                  scalar_type_name(dtype()));
  const std::int64_t correction = unbiased ? 1 : 0;
  return in_float_math(*this, [&](const Tensor& x) { return VarFn::apply(x, dims, correction, keepdim); });
}
Tensor Tensor::std(IntArrayRef dims, bool unbiased, bool keepdim) const {
  return var(dims, unbiased, keepdim).sqrt();
}

Tensor Tensor::norm(const Scalar& p) const { return norm(p, {}, false); }
Tensor Tensor::norm(const Scalar& p, IntArrayRef dims, bool keepdim) const {
  KILN_CHECK_TYPE(is_floating_point(), "linalg.vector_norm: Expected a floating point tensor as "
                  "input. Got ", scalar_type_name(dtype()));
  const double order = p.to_double();
  if (order == 2.0) return Norm2Fn::apply(*this, dims, keepdim);
  if (order == 1.0) return abs().sum(dims, keepdim);
  if (std::isinf(order)) return order > 0 ? abs().amax(dims, keepdim) : abs().amin(dims, keepdim);
  KILN_CHECK_VALUE(order > 0, "norm: only positive orders are supported, got ", order);
  return abs().pow(order).sum(dims, keepdim).pow(1.0 / order);
}

Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const {
  return amp::run<amp::CastPolicy::Fp32>([dims, keepdim](const Tensor& self) {
    const Tensor input = self.is_floating_point() ? self : self.to(default_dtype());
    return in_float_math(input, [&](const Tensor& x) {
      // log sum exp(x) = m + log sum exp(x - m) with m = max(x): no overflow. m is detached: the
      // result does not depend on it mathematically, so its gradient is zero anyway. Where the
      // max is infinite it is replaced by 0 so that inf - inf does not make a NaN.
      Tensor m = x.detach().amax(dims, true);
      m = kiln::where(m.abs() == INFINITY, 0.0, m);
      Tensor out = (x - m).exp().sum(dims, true).log() + m;
      return keepdim ? out : out.reshape(ops::reduced_shape(x.sizes(), wrap_dims(dims, x.dim()), false));
    });
  }, *this);
}

}  // namespace kiln
