// autograd/functions/view.cpp — differentiable views. A view's output shares its input's
// storage (Note [Strides and views]); its backward maps the gradient back to the input's
// shape: reshape back, transpose back, sum over what expand repeated, or scatter into zeros
// for the views that pick a subset (slice, select, diagonal).
// Read next: autograd/functions/index.cpp.
#include <functional>
#include <numeric>

#include "autograd/function.h"
#include "autograd/functions/reduce.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"

namespace kiln {

namespace {

using autograd::Context;
using autograd::Function;

struct ViewFn : Function<ViewFn> {
  static constexpr const char* name = "ViewBackward0";
  struct Saved { Shape sizes; };
  static Tensor forward(Context<ViewFn>& ctx, const Tensor& x, IntArrayRef sizes, bool allow_copy) {
    ctx.saved = {x.sizes().vec()};
    return allow_copy ? ops::reshape(x, sizes) : ops::view(x, sizes);
  }
  // same elements, another shape: reshape the gradient back
  static TensorList backward(Context<ViewFn>& ctx, const TensorList& g) {
    return {g[0].reshape(ctx.saved.sizes)};
  }
};

struct TransposeFn : Function<TransposeFn> {
  static constexpr const char* name = "TransposeBackward0";
  struct Saved { std::int64_t a, b; };
  static Tensor forward(Context<TransposeFn>& ctx, const Tensor& x, std::int64_t a, std::int64_t b) {
    ctx.saved = {a, b};
    return ops::transpose(x, a, b);
  }
  // a transpose is its own inverse
  static TensorList backward(Context<TransposeFn>& ctx, const TensorList& g) {
    return {g[0].transpose(ctx.saved.a, ctx.saved.b)};
  }
};

struct PermuteFn : Function<PermuteFn> {
  static constexpr const char* name = "PermuteBackward0";
  struct Saved { Shape inverse; };
  static Tensor forward(Context<PermuteFn>& ctx, const Tensor& x, IntArrayRef dims) {
    Tensor y = ops::permute(x, dims);
    Shape inverse(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) {
      inverse[static_cast<std::size_t>(wrap_dim(dims[i], x.dim()))] = static_cast<std::int64_t>(i);
    }
    ctx.saved = {inverse};
    return y;
  }
  // permute the gradient by the inverse permutation
  static TensorList backward(Context<PermuteFn>& ctx, const TensorList& g) {
    return {g[0].permute(ctx.saved.inverse)};
  }
};

struct UnsqueezeFn : Function<UnsqueezeFn> {
  static constexpr const char* name = "UnsqueezeBackward0";
  struct Saved { Shape sizes; };
  static Tensor forward(Context<UnsqueezeFn>& ctx, const Tensor& x, std::int64_t dim) {
    ctx.saved = {x.sizes().vec()};
    return ops::unsqueeze(x, dim);
  }
  // a dim of size 1 was added: remove it from the gradient
  static TensorList backward(Context<UnsqueezeFn>& ctx, const TensorList& g) {
    return {g[0].reshape(ctx.saved.sizes)};
  }
};

struct SqueezeFn : Function<SqueezeFn> {
  static constexpr const char* name = "SqueezeBackward0";
  struct Saved { Shape sizes; };
  static Tensor forward(Context<SqueezeFn>& ctx, const Tensor& x, std::optional<std::int64_t> dim) {
    ctx.saved = {x.sizes().vec()};
    return dim ? ops::squeeze(x, *dim) : ops::squeeze(x);
  }
  // dims of size 1 were removed: put them back
  static TensorList backward(Context<SqueezeFn>& ctx, const TensorList& g) {
    return {g[0].reshape(ctx.saved.sizes)};
  }
};

struct ExpandFn : Function<ExpandFn> {
  static constexpr const char* name = "ExpandBackward0";
  struct Saved { Shape sizes; };
  static Tensor forward(Context<ExpandFn>& ctx, const Tensor& x, IntArrayRef sizes) {
    ctx.saved = {x.sizes().vec()};
    return ops::expand(x, sizes);
  }
  // every repeated copy contributes: sum the gradient over the expanded dims
  static TensorList backward(Context<ExpandFn>& ctx, const TensorList& g) {
    return {sum_to(g[0], ctx.saved.sizes)};
  }
};

/// The backward of a view that picks a subset of its input (slice, select, diagonal): zeros
/// of the input's shape with the gradient written where the view looked. Its own backward
/// applies the view again, so double backward works.
struct ViewScatterFn : Function<ViewScatterFn> {
  static constexpr const char* name = "ViewScatterBackward0";
  using ViewOf = std::function<Tensor(const Tensor&)>;
  struct Saved { ViewOf view; };
  static Tensor forward(Context<ViewScatterFn>& ctx, const Tensor& grad, IntArrayRef base_sizes,
                        const ViewOf& view) {
    ctx.saved = {view};
    Tensor base = zeros(base_sizes, grad.options());
    ops::copy_data(view(base), grad);
    return base;
  }
  // d/dgrad of "write grad into a region of zeros" is "read that region"
  static TensorList backward(Context<ViewScatterFn>& ctx, const TensorList& g) {
    return {ctx.saved.view(g[0])};
  }
};

template <class Derived>
struct SubsetView {
  struct Saved { Shape sizes; ViewScatterFn::ViewOf view; };
  static TensorList backward(Context<Derived>& ctx, const TensorList& g) {
    return {ViewScatterFn::apply(g[0], IntArrayRef(ctx.saved.sizes), ctx.saved.view)};
  }
};

struct SliceFn : Function<SliceFn>, SubsetView<SliceFn> {
  static constexpr const char* name = "SliceBackward0";
  using SubsetView<SliceFn>::Saved;
  using SubsetView<SliceFn>::backward;
  static Tensor forward(Context<SliceFn>& ctx, const Tensor& x, std::int64_t dim,
                        std::optional<std::int64_t> start, std::optional<std::int64_t> end,
                        std::int64_t step) {
    if (ctx.recording()) ctx.saved = {x.sizes().vec(), [=](const Tensor& t) { return t.slice(dim, start, end, step); }};
    return ops::slice(x, dim, start, end, step);
  }
};

struct SelectFn : Function<SelectFn>, SubsetView<SelectFn> {
  static constexpr const char* name = "SelectBackward0";
  using SubsetView<SelectFn>::Saved;
  using SubsetView<SelectFn>::backward;
  static Tensor forward(Context<SelectFn>& ctx, const Tensor& x, std::int64_t dim, std::int64_t index) {
    if (ctx.recording()) ctx.saved = {x.sizes().vec(), [=](const Tensor& t) { return t.select(dim, index); }};
    return ops::select(x, dim, index);
  }
};

struct NarrowFn : Function<NarrowFn>, SubsetView<NarrowFn> {
  static constexpr const char* name = "NarrowBackward0";
  using SubsetView<NarrowFn>::Saved;
  using SubsetView<NarrowFn>::backward;
  static Tensor forward(Context<NarrowFn>& ctx, const Tensor& x, std::int64_t dim,
                        std::int64_t start, std::int64_t length) {
    if (ctx.recording()) ctx.saved = {x.sizes().vec(), [=](const Tensor& t) { return t.narrow(dim, start, length); }};
    return ops::narrow(x, dim, start, length);
  }
};

struct DiagonalFn : Function<DiagonalFn>, SubsetView<DiagonalFn> {
  static constexpr const char* name = "DiagonalBackward0";
  using SubsetView<DiagonalFn>::Saved;
  using SubsetView<DiagonalFn>::backward;
  static Tensor forward(Context<DiagonalFn>& ctx, const Tensor& x, std::int64_t offset,
                        std::int64_t d1, std::int64_t d2) {
    if (ctx.recording()) ctx.saved = {x.sizes().vec(), [=](const Tensor& t) { return t.diagonal(offset, d1, d2); }};
    return ops::diagonal(x, offset, d1, d2);
  }
};

// Note [One node for the pieces]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// split, chunk and unbind return views of their input, as narrow and select do, but made by
// one node whose backward puts the pieces' gradients back side by side: one cat (a stack for
// unbind) into a fresh tensor. As k separate narrows, each piece's backward would zero a whole
// copy of the input and write its piece into it, and autograd would add the k copies up: k
// times the input's size zeroed and summed where one copy of it suffices. That is quadratic in
// a recurrence that takes its steps one select at a time (a GRU over T steps zeroed T copies
// of the [T, B, 3H] projections); a Transformer's in_proj_weight.chunk(3) paid three zeroed
// copies and a sum for every step. The nodes carry PyTorch's names (SplitBackward0,
// SplitWithSizesBackward0, UnbindBackward0), and, as everywhere in Kiln, a piece that requires
// grad cannot be modified in place (Note [In-place ops and the creation contract]).

/// split (WithSizes false: split and chunk) and split_with_sizes, with their own node names.
template <bool WithSizes>
struct SplitFn : Function<SplitFn<WithSizes>> {
  static constexpr const char* name = WithSizes ? "SplitWithSizesBackward0" : "SplitBackward0";
  struct Saved { std::int64_t dim; };
  static TensorList forward(Context<SplitFn>& ctx, const Tensor& x, IntArrayRef sizes, std::int64_t dim) {
    ctx.saved = {dim};
    TensorList parts;
    std::int64_t start = 0;
    for (std::int64_t length : sizes) {
      parts.push_back(ops::narrow(x, dim, start, length));
      start += length;
    }
    return parts;
  }
  // the pieces' gradients side by side, where the pieces lay
  static TensorList backward(Context<SplitFn>& ctx, const TensorList& g) { return {cat(g, ctx.saved.dim)}; }
};

struct UnbindFn : Function<UnbindFn> {
  static constexpr const char* name = "UnbindBackward0";
  struct Saved { std::int64_t dim; };
  static TensorList forward(Context<UnbindFn>& ctx, const Tensor& x, std::int64_t dim) {
    ctx.saved = {dim};
    TensorList parts;
    for (std::int64_t i = 0; i < x.sizes()[dim]; ++i) parts.push_back(ops::select(x, dim, i));
    return parts;
  }
  // each piece's gradient back in its place along dim
  static TensorList backward(Context<UnbindFn>& ctx, const TensorList& g) { return {stack(g, ctx.saved.dim)}; }
};

}  // namespace

Tensor Tensor::view(IntArrayRef sizes) const { return ViewFn::apply(*this, sizes, false); }
Tensor Tensor::reshape(IntArrayRef sizes) const { return ViewFn::apply(*this, sizes, true); }
Tensor Tensor::transpose(std::int64_t dim0, std::int64_t dim1) const {
  return TransposeFn::apply(*this, dim0, dim1);
}
Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::permute(IntArrayRef dims) const { return PermuteFn::apply(*this, dims); }
Tensor Tensor::unsqueeze(std::int64_t dim) const { return UnsqueezeFn::apply(*this, dim); }
Tensor Tensor::squeeze() const { return SqueezeFn::apply(*this, std::optional<std::int64_t>()); }
Tensor Tensor::squeeze(std::int64_t dim) const {
  return SqueezeFn::apply(*this, std::optional<std::int64_t>(dim));
}
Tensor Tensor::expand(IntArrayRef sizes) const { return ExpandFn::apply(*this, sizes); }
Tensor Tensor::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  return NarrowFn::apply(*this, dim, start, length);
}
Tensor Tensor::slice(std::int64_t dim, std::optional<std::int64_t> start,
                     std::optional<std::int64_t> end, std::int64_t step) const {
  return SliceFn::apply(*this, dim, start, end, step);
}
Tensor Tensor::select(std::int64_t dim, std::int64_t index) const {
  return SelectFn::apply(*this, dim, index);
}
Tensor Tensor::flatten(std::int64_t start_dim, std::int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const std::int64_t s = wrap_dim(start_dim, dim()), e = wrap_dim(end_dim, dim());
  KILN_CHECK(s <= e, "flatten() has invalid args: start_dim cannot come after end_dim");
  Shape sizes(this->sizes().begin(), this->sizes().begin() + s);
  std::int64_t merged = 1;
  for (std::int64_t d = s; d <= e; ++d) merged *= this->sizes()[d];
  sizes.push_back(merged);
  sizes.insert(sizes.end(), this->sizes().begin() + e + 1, this->sizes().end());
  return reshape(sizes);
}
Tensor Tensor::unflatten(std::int64_t dim, IntArrayRef sizes) const {
  const std::int64_t d = wrap_dim(dim, this->dim());
  const Shape inner = infer_size(sizes, this->sizes()[d]);
  Shape out(this->sizes().begin(), this->sizes().begin() + d);
  out.insert(out.end(), inner.begin(), inner.end());
  out.insert(out.end(), this->sizes().begin() + d + 1, this->sizes().end());
  return view(out);
}
TensorList Tensor::split(std::int64_t split_size, std::int64_t dim) const {
  KILN_CHECK(this->dim() > 0, "split expects at least a 1-dimensional tensor");
  KILN_CHECK(split_size > 0 || sizes()[wrap_dim(dim, this->dim())] == 0,
             "split expects split_size be non-negative, but got split_size=", split_size);
  const std::int64_t d = wrap_dim(dim, this->dim()), n = sizes()[d];
  if (n == 0) return {*this};
  Shape lengths;
  for (std::int64_t start = 0; start < n; start += split_size) lengths.push_back(std::min(split_size, n - start));
  return SplitFn<false>::apply(*this, IntArrayRef(lengths), d);
}
TensorList Tensor::split_with_sizes(IntArrayRef split_sizes, std::int64_t dim) const {
  KILN_CHECK(this->dim() > 0, "split expects at least a 1-dimensional tensor");
  const std::int64_t n = sizes()[wrap_dim(dim, this->dim())];
  for (auto s : split_sizes) {
    KILN_CHECK(s >= 0, "split_with_sizes expects split_sizes have only non-negative entries, but got split_sizes=",
               split_sizes);
  }
  const std::int64_t total = std::accumulate(split_sizes.begin(), split_sizes.end(), std::int64_t{0});
  KILN_CHECK_VALUE(total == n, "split_with_sizes expects split_sizes to sum exactly to ", n,
             " (input tensor's size at dimension ", dim, "), but got split_sizes=", split_sizes);
  return SplitFn<true>::apply(*this, split_sizes, wrap_dim(dim, this->dim()));
}
TensorList Tensor::chunk(std::int64_t chunks, std::int64_t dim) const {
  KILN_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  const std::int64_t n = sizes()[wrap_dim(dim, this->dim())];
  return split(std::max<std::int64_t>((n + chunks - 1) / chunks, 1), dim);
}
TensorList Tensor::unbind(std::int64_t dim) const {
  KILN_CHECK(this->dim() > 0, "Dimension specified as ", dim, " but tensor has no dimensions");
  return UnbindFn::apply(*this, wrap_dim(dim, this->dim()));
}
Tensor Tensor::diagonal(std::int64_t offset, std::int64_t dim1, std::int64_t dim2) const {
  return DiagonalFn::apply(*this, offset, dim1, dim2);
}

Tensor stack(const TensorList& tensors, std::int64_t dim) {
  KILN_CHECK(!tensors.empty(), "stack expects a non-empty TensorList");
  const std::int64_t d = wrap_dim(dim, tensors.front().dim() + 1);
  TensorList parts;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    KILN_CHECK(tensors[i].sizes() == tensors.front().sizes(),
               "stack expects each tensor to be equal size, but got ", tensors.front().sizes(),
               " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace kiln
