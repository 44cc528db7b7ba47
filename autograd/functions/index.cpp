// autograd/functions/index.cpp — cat and the index ops. Each backward is the op's adjoint:
// index_select <-> index_add, gather <-> scatter_add, cat <-> narrow. The index tensors
// themselves are Int64 and never receive gradients.
// Read next: autograd/functions/nn.cpp.
#include "autograd/functions/index.h"

#include "autograd/function.h"
#include "core/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/index.h"
#include "core/shape.h"
#include "core/ops/reduce.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct CatFn : Function<CatFn> {
  static constexpr const char* name = "CatBackward0";
  static constexpr amp::CastPolicy autocast_policy = amp::CastPolicy::Promote;
  struct Saved { std::int64_t dim; std::vector<Shape> sizes; };
  static Tensor forward(Context<CatFn>& ctx, const TensorList& tensors, std::int64_t dim) {
    Tensor out = ops::cat(tensors, dim);
    ctx.saved.dim = wrap_dim(dim, out.dim());
    for (const Tensor& t : tensors) ctx.saved.sizes.push_back(t.sizes().vec());
    return out;
  }
  // each input gets back its own stretch of the gradient
  static TensorList backward(Context<CatFn>& ctx, const TensorList& g) {
    TensorList grads;
    std::int64_t offset = 0;
    for (std::size_t i = 0; i < ctx.saved.sizes.size(); ++i) {
      const Shape& s = ctx.saved.sizes[i];
      const bool skipped = s.size() == 1 && s[0] == 0 && g[0].dim() != 1;  // legacy empty input
      const std::int64_t n = skipped ? 0 : s[static_cast<std::size_t>(ctx.saved.dim)];
      grads.push_back(ctx.needs_input_grad(i) ? (skipped ? zeros(s, g[0].options())
                                                         : g[0].narrow(ctx.saved.dim, offset, n))
                                              : Tensor());
      offset += n;
    }
    return grads;
  }
};

struct IndexSelectFn : Function<IndexSelectFn> {
  static constexpr const char* name = "IndexSelectBackward0";
  struct Saved { Shape sizes; std::int64_t dim; };
  static Tensor forward(Context<IndexSelectFn>& ctx, const Tensor& x, std::int64_t dim, const Tensor& index) {
    ctx.saved = {x.sizes().vec(), dim};
    ctx.save_for_backward({index});
    return ops::index_select(x, dim, index);
  }
  // selected rows receive their gradient; a row selected twice receives both (index_add)
  static TensorList backward(Context<IndexSelectFn>& ctx, const TensorList& g) {
    const Tensor index = ctx.get_saved_variables()[0];
    return {zeros(ctx.saved.sizes, g[0].options()).index_add(ctx.saved.dim, index, g[0]), Tensor()};
  }
};

struct IndexAddFn : Function<IndexAddFn> {
  static constexpr const char* name = "IndexAddBackward0";
  struct Saved { std::int64_t dim; };
  static Tensor forward(Context<IndexAddFn>& ctx, const Tensor& x, std::int64_t dim,
                        const Tensor& index, const Tensor& source) {
    ctx.saved = {dim};
    ctx.save_for_backward({index});
    return ops::index_add(x, dim, index, source);
  }
  // d/dx = identity; d/dsource = the gradient rows at index (index_select)
  static TensorList backward(Context<IndexAddFn>& ctx, const TensorList& g) {
    const Tensor index = ctx.get_saved_variables()[0];
    Tensor gs;
    if (ctx.needs_input_grad(2)) gs = g[0].index_select(ctx.saved.dim, index);
    return {g[0], Tensor(), gs};
  }
};

struct GatherFn : Function<GatherFn> {
  static constexpr const char* name = "GatherBackward0";
  struct Saved { Shape sizes; std::int64_t dim; };
  static Tensor forward(Context<GatherFn>& ctx, const Tensor& x, std::int64_t dim, const Tensor& index) {
    ctx.saved = {x.sizes().vec(), dim};
    ctx.save_for_backward({index});
    return ops::gather(x, dim, index);
  }
  // every gathered element sends its gradient back to where it came from (scatter_add)
  static TensorList backward(Context<GatherFn>& ctx, const TensorList& g) {
    const Tensor index = ctx.get_saved_variables()[0];
    return {zeros(ctx.saved.sizes, g[0].options()).scatter_add(ctx.saved.dim, index, g[0]), Tensor()};
  }
};

struct ScatterFn : Function<ScatterFn> {
  static constexpr const char* name = "ScatterBackward0";
  struct Saved { std::int64_t dim; bool accumulate; };
  static Tensor forward(Context<ScatterFn>& ctx, const Tensor& x, std::int64_t dim,
                        const Tensor& index, const Tensor& src, bool accumulate) {
    ctx.saved = {dim, accumulate};
    ctx.save_for_backward({index});
    return ops::scatter(x, dim, index, src, accumulate);
  }
  // scatter: overwritten positions of x get no gradient, src gets the gradient at its targets
  // scatter_add: x passes the gradient through unchanged
  static TensorList backward(Context<ScatterFn>& ctx, const TensorList& g) {
    const Tensor index = ctx.get_saved_variables()[0];
    const std::int64_t dim = ctx.saved.dim;
    Tensor gx, gs;
    if (ctx.needs_input_grad(0)) gx = ctx.saved.accumulate ? g[0] : g[0].scatter(dim, index, 0);
    if (ctx.needs_input_grad(2)) gs = g[0].gather(dim, index);
    return {gx, Tensor(), gs};
  }
};

}  // namespace

Tensor cat(const TensorList& tensors, std::int64_t dim) { return CatFn::apply(tensors, dim); }

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  return IndexSelectFn::apply(x, dim, index);
}
Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) { return GatherFn::apply(x, dim, index); }
Tensor scatter(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterFn::apply(x, dim, index, src, false);
}
Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  return ScatterFn::apply(x, dim, index, src, true);
}
Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& source) {
  return IndexAddFn::apply(x, dim, index, source);
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  return x.masked_fill(mask, value);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) { return x.masked_select(mask); }

Tensor nonzero(const Tensor& x) { return ops::nonzero(x); }

// Composed of differentiable ops, so its backward is index_select's: the gradient goes back to
// the selected positions of the broadcast x and sums over what broadcasting repeated.
Tensor Tensor::masked_select(const Tensor& mask) const {
  KILN_CHECK(mask.dtype() == DType::Bool, "masked_select: expected BoolTensor for mask, got a ", mask.dtype(), " mask");
  const Shape shape = broadcast_shapes(sizes(), mask.sizes());
  const Tensor positions = ops::nonzero(mask.expand(shape).reshape({-1})).view({-1});
  return expand(shape).reshape({-1}).index_select(0, positions);
}

Tensor Tensor::nonzero(std::source_location where) const { return ops::nonzero(*this, where); }

Tensor one_hot(const Tensor& indices, std::int64_t num_classes) {
  KILN_CHECK_TYPE(indices.dtype() == DType::Int64,
                  "one_hot is only applicable to index tensor of type LongTensor.");
  if (num_classes == -1) {
    KILN_CHECK(indices.numel() > 0, "Can not infer total number of classes from empty tensor.");
    KILN_CHECK(!indices.is_meta(), "one_hot: num_classes must be given for meta tensors (there are "
               "no values to infer it from)");
    num_classes = ops::amax(indices, {}, false).item<std::int64_t>() + 1;
  }
  if (indices.numel() > 0 && !indices.is_meta()) {
    KILN_CHECK(ops::amin(indices, {}, false).item<std::int64_t>() >= 0, "Class values must be non-negative.");
    KILN_CHECK(ops::amax(indices, {}, false).item<std::int64_t>() < num_classes,
               "Class values must be smaller than num_classes.");
  }
  // indices[..., None] == arange(C): a Bool mask, returned as Int64 like PyTorch.
  return (indices.unsqueeze(-1) == arange(num_classes, TensorOptions().device(indices.device())))
      .to(DType::Int64);
}

Tensor Tensor::index_select(std::int64_t dim, const Tensor& index) const {
  return IndexSelectFn::apply(*this, dim, index);
}
Tensor Tensor::index_add(std::int64_t dim, const Tensor& index, const Tensor& source) const {
  return IndexAddFn::apply(*this, dim, index, source);
}
Tensor Tensor::gather(std::int64_t dim, const Tensor& index) const { return GatherFn::apply(*this, dim, index); }
Tensor Tensor::scatter(std::int64_t dim, const Tensor& index, const Tensor& src) const {
  return ScatterFn::apply(*this, dim, index, src, false);
}
Tensor Tensor::scatter(std::int64_t dim, const Tensor& index, const Scalar& value) const {
  return ScatterFn::apply(*this, dim, index, ops::wrapped_scalar(value), false);
}
Tensor Tensor::scatter_add(std::int64_t dim, const Tensor& index, const Tensor& src) const {
  return ScatterFn::apply(*this, dim, index, src, true);
}

}  // namespace kiln
