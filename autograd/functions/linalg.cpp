// autograd/functions/linalg.cpp — mm and bmm as Functions; matmul, addmm and linear as
// composites of them. The CPU kernel maps transposed operands in place, so the backward
// formulas' transposes (grad @ b^T, a^T @ grad) never copy.
// Read next: autograd/functions/view.cpp.
#include "autograd/functions/linalg.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/creation.h"
#include "core/ops/linalg.h"
#include "core/ops/view.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

/// A meta tensor with `t`'s sizes and strides: remembers a layout without holding memory.
Tensor layout_of(const Tensor& t) {
  return ops::as_strided(empty({0}, kMeta), t.sizes(), t.strides(), 0, "layout");
}

/// lhs @ rhs, computed so that the result has the memory layout of `like` (the input the
/// gradient is for). linear() multiplies by w.t(), a column-major view of the weight; writing
/// its gradient as (rhs^T lhs^T)^T makes it column-major too, so that after the transpose's
/// backward it lands in the weight's own row-major layout and AccumulateGrad keeps it without
/// a copy (PyTorch's mm backward makes the same choice).
Tensor mm_in_layout_of(const Tensor& lhs, const Tensor& rhs, const Tensor& like) {
  const bool column_major = like.dim() == 2 && !like.is_contiguous() && like.strides()[0] == 1 &&
                            like.strides()[1] == like.sizes()[0];
  return column_major ? rhs.t().mm(lhs.t()).t() : lhs.mm(rhs);
}

struct MmFn : Function<MmFn> {
  static constexpr const char* name = "MmBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::LowerPrecision;
  // Geometry-only handles (no data kept alive beyond what is saved anyway) to pick layouts.
  struct Saved { Tensor a_layout, b_layout; };
  static Tensor forward(Context<MmFn>& ctx, const Tensor& a, const Tensor& b) {
    if (ctx.recording()) ctx.saved = {layout_of(a), layout_of(b)};
    ctx.save_for_backward({ctx.needs_input_grad(1) ? a : Tensor(), ctx.needs_input_grad(0) ? b : Tensor()});
    return ops::mm(a, b);
  }
  // C = A B  =>  dA = dC B^T,  dB = A^T dC  (each in its input's layout)
  static TensorList backward(Context<MmFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = mm_in_layout_of(g[0], s[1].t(), ctx.saved.a_layout);
    if (ctx.needs_input_grad(1)) gb = mm_in_layout_of(s[0].t(), g[0], ctx.saved.b_layout);
    return {ga, gb};
  }
};

struct BmmFn : Function<BmmFn> {
  static constexpr const char* name = "BmmBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::LowerPrecision;
  static Tensor forward(Context<BmmFn>& ctx, const Tensor& a, const Tensor& b) {
    ctx.save_for_backward({ctx.needs_input_grad(1) ? a : Tensor(), ctx.needs_input_grad(0) ? b : Tensor()});
    return ops::bmm(a, b);
  }
  // per batch: dA = dC B^T,  dB = A^T dC
  static TensorList backward(Context<BmmFn>& ctx, const TensorList& g) {
    const TensorList s = ctx.get_saved_variables();
    Tensor ga, gb;
    if (ctx.needs_input_grad(0)) ga = g[0].bmm(s[1].transpose(1, 2));
    if (ctx.needs_input_grad(1)) gb = s[0].transpose(1, 2).bmm(g[0]);
    return {ga, gb};
  }
};

}  // namespace

/// The product of every size but the last: the rows of x seen as a matrix [rows, x.size(-1)].
static std::int64_t leading_numel(const Tensor& x) {
  return compute_numel(x.sizes().slice(0, static_cast<std::size_t>(x.dim() - 1)));
}

Tensor mm(const Tensor& a, const Tensor& b) { return MmFn::apply(a, b); }
Tensor bmm(const Tensor& a, const Tensor& b) { return BmmFn::apply(a, b); }

static Tensor matmul_impl(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() > 0 && b.dim() > 0, "both arguments to matmul need to be at least 1D, but they are ",
             a.dim(), "D and ", b.dim(), "D");
  if (a.dim() == 1 && b.dim() == 1) {
    KILN_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(),
               "] and src [", b.numel(), "] to have the same number of elements, but got ",
               a.numel(), " and ", b.numel(), " elements respectively");
    return (a * b).sum();
  }
  if (a.dim() == 2 && b.dim() == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (a.dim() == 1 && b.dim() == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  if (a.dim() >= 3 && b.dim() <= 2) {
    // [..., n, k] @ [k, m]: fold the batch into the rows, one GEMM.
    const Tensor rhs = b.dim() == 1 ? b.unsqueeze(1) : b;
    const std::int64_t k = a.sizes().back();
    // The rows are counted, not inferred with -1: k may be 0, and numel / k with it.
    const std::int64_t rows = leading_numel(a);
    KILN_CHECK(k == rhs.sizes()[0], msg::mm_shapes({rows, k}, rhs.sizes()));
    Shape out_shape = a.sizes().vec();
    out_shape.back() = rhs.sizes()[1];
    Tensor out = mm(a.reshape({rows, k}), rhs).view(out_shape);
    return b.dim() == 1 ? out.squeeze(-1) : out;
  }
  // General batched case: broadcast the batch dims, then one bmm.
  const Tensor lhs = a.dim() == 1 ? a.unsqueeze(0) : a;
  const Tensor rhs = b.dim() == 1 ? b.unsqueeze(1) : b;
  const std::int64_t n = lhs.sizes()[lhs.dim() - 2], k = lhs.sizes().back();
  const std::int64_t k2 = rhs.sizes()[rhs.dim() - 2], m = rhs.sizes().back();
  KILN_CHECK(k == k2, "Expected size for first two dimensions of batch2 tensor to be: [", k,
             "] but got: [", k2, "].");
  const Shape batch = broadcast_shapes(lhs.sizes().slice(0, static_cast<std::size_t>(lhs.dim() - 2)),
                                       rhs.sizes().slice(0, static_cast<std::size_t>(rhs.dim() - 2)));
  Shape lhs_shape = batch, rhs_shape = batch, out_shape = batch;
  lhs_shape.insert(lhs_shape.end(), {n, k});
  rhs_shape.insert(rhs_shape.end(), {k, m});
  out_shape.insert(out_shape.end(), {n, m});
  // Expanded batch dims have stride 0 and the bmm kernel reads them in place. The batch is
  // counted, not inferred with -1, which an empty matrix (n, k or m of 0) leaves undetermined.
  const std::int64_t batches = compute_numel(batch);
  Tensor out = bmm(lhs.expand(lhs_shape).reshape({batches, n, k}), rhs.expand(rhs_shape).reshape({batches, k, m}))
                   .view(out_shape);
  if (a.dim() == 1) out = out.squeeze(-2);
  if (b.dim() == 1) out = out.squeeze(-1);
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  return amp::run<amp::CastPolicy::LowerPrecision>(matmul_impl, a, b);
}

static Tensor addmm_impl(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                         const Scalar& alpha) {
  Tensor product = mm(mat1, mat2);
  if (alpha.to_double() != 1.0) product = product * alpha;
  if (beta.to_double() == 0.0) return product;  // PyTorch ignores self (even NaN) when beta = 0
  return beta.to_double() == 1.0 ? self + product : self * beta + product;
}

Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  return amp::run<amp::CastPolicy::LowerPrecision>(addmm_impl, self, mat1, mat2, beta, alpha);
}

static Tensor linear_impl(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  KILN_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got ",
             weight.sizes());
  // A 0-d input has no last dim to compare: matmul's own message, as PyTorch's linear gives.
  KILN_CHECK(input.dim() >= 1, "both arguments to matmul need to be at least 1D, but they are ", input.dim(),
             "D and ", weight.dim(), "D");
  KILN_CHECK(input.sizes().back() == weight.sizes()[1],
             msg::mm_shapes({leading_numel(input), input.sizes().back()}, {weight.sizes()[1], weight.sizes()[0]}));
  Tensor out = matmul(input, weight.t());
  return bias.defined() ? out + bias : out;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  return amp::run<amp::CastPolicy::LowerPrecision>(linear_impl, input, weight, bias);
}

Tensor Tensor::matmul(const Tensor& other) const { return kiln::matmul(*this, other); }
Tensor Tensor::mm(const Tensor& other) const { return MmFn::apply(*this, other); }
Tensor Tensor::bmm(const Tensor& other) const { return BmmFn::apply(*this, other); }
Tensor Tensor::addmm(const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
                     const Scalar& alpha) const {
  return kiln::addmm(*this, mat1, mat2, beta, alpha);
}

}  // namespace kiln
