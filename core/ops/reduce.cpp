// core/ops/reduce.cpp — raw reductions (see core/ops/reduce.h).
#include "core/ops/reduce.h"

#include <algorithm>

#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/view.h"

namespace kiln::ops {

Shape reduced_shape(IntArrayRef sizes, IntArrayRef wrapped_dims, bool keepdim) {
  Shape out;
  for (std::int64_t d = 0; d < static_cast<std::int64_t>(sizes.size()); ++d) {
    const bool reduced =
        std::find(wrapped_dims.begin(), wrapped_dims.end(), d) != wrapped_dims.end();
    if (!reduced) out.push_back(sizes[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

namespace {

const char* reduce_name(ReduceOp op) {
  constexpr const char* names[] = {"sum", "prod", "amax", "amin"};
  return names[static_cast<int>(op)];
}

Tensor reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, bool keepdim, DType out_dtype, double divisor = 1) {
  const Shape wrapped = wrap_dims(dims, x.dim());
  if (op == ReduceOp::Amax || op == ReduceOp::Amin) {
    for (auto d : wrapped) {
      KILN_CHECK_INDEX(x.sizes()[d] != 0, reduce_name(op), "(): Expected reduction dim ", d,
                       " to have non-zero size.");
    }
  }
  Tensor out = empty_output(reduced_shape(x.sizes(), wrapped, keepdim), out_dtype, x.device(),
                            reduce_name(op));
  // The kernel writes through a keepdim-shaped view of the same memory.
  const Shape kept = reduced_shape(x.sizes(), wrapped, true);
  Tensor out_kept = make_view(out, kept, contiguous_strides(kept), 0, reduce_name(op));
  require_kernel(kernels_for(x.device().type()).reduce[static_cast<int>(op)], reduce_name(op),
                 x.device())(out_kept, to_dtype(x, out_dtype), wrapped, divisor);
  return out;
}

DType integral_to_long(DType t) { return is_floating_point(t) ? t : DType::Int64; }

}  // namespace

Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype) {
  return reduce(ReduceOp::Sum, x, dims, keepdim, dtype.value_or(integral_to_long(x.dtype())));
}

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim, double divisor, std::optional<DType> dtype) {
  const DType t = dtype.value_or(x.dtype());
  KILN_CHECK_TYPE(is_floating_point(t), "mean(): could not infer output dtype. Input dtype must be either a "
                  "floating point or complex dtype. Got: ", scalar_type_name(t));
  return reduce(ReduceOp::Sum, x, dims, keepdim, t, divisor);
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& x, IntArrayRef dims, std::int64_t correction, bool keepdim,
                                    bool with_mean) {
  KILN_CHECK_TYPE(is_floating_point(x.dtype()), "var(): input dtype should be floating point, but got ",
                  scalar_type_name(x.dtype()));
  const Shape wrapped = wrap_dims(dims, x.dim());
  std::int64_t n = 1;
  for (auto d : wrapped) n *= x.sizes()[d];
  const auto divisor = static_cast<double>(std::max<std::int64_t>(n - correction, 0));
  const Shape shape = reduced_shape(x.sizes(), wrapped, keepdim);
  const VarMeanKernel kernel = kernels_for(x.device().type()).var_mean;
  if (kernel == nullptr) {
    // Composed: the mean, the centred squares, their mean with N - correction as its count.
    const Tensor mean = ops::mean(x, wrapped, true, static_cast<double>(n));
    const Tensor centred = binary(BinaryOp::Sub, x, mean);
    const Tensor var = ops::mean(binary(BinaryOp::Mul, centred, centred), wrapped, keepdim, divisor);
    if (!with_mean) return {var, Tensor()};
    return {var, keepdim ? mean : reshape(mean, shape)};
  }
  Tensor var = empty_output(shape, x.dtype(), x.device(), "var");
  Tensor mean = with_mean ? empty_output(shape, x.dtype(), x.device(), "var_mean") : Tensor();
  // The kernel writes through keepdim-shaped views of the same memory.
  const Shape kept = reduced_shape(x.sizes(), wrapped, true);
  const Shape strides = contiguous_strides(kept);
  kernel(make_view(var, kept, strides, 0, "var"), with_mean ? make_view(mean, kept, strides, 0, "var_mean") : Tensor(),
         x, wrapped, divisor);
  return {var, mean};
}

Tensor prod(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype) {
  return reduce(ReduceOp::Prod, x, dims, keepdim, dtype.value_or(integral_to_long(x.dtype())));
}

Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return reduce(ReduceOp::Amax, x, dims, keepdim, x.dtype());
}

Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  return reduce(ReduceOp::Amin, x, dims, keepdim, x.dtype());
}

namespace {

std::tuple<Tensor, Tensor> extreme_dim(const Tensor& x, std::int64_t dim, bool keepdim, bool is_max) {
  const char* name = is_max ? "max" : "min";
  const std::int64_t d = wrap_dim(dim, x.dim());
  if (x.dim() == 0) {
    // A 0-dim tensor is its own max, at index 0.
    Tensor idx = empty_output({}, DType::Int64, x.device(), name);
    fill_data(idx, 0);
    return {clone(x), idx};
  }
  KILN_CHECK_INDEX(x.sizes()[d] != 0, name, "(): Expected reduction dim ", d,
                   " to have non-zero size.");
  const Shape dims{d};
  const Shape shape = reduced_shape(x.sizes(), dims, keepdim);
  Tensor values = empty_output(shape, x.dtype(), x.device(), name);
  Tensor indices = empty_output(shape, DType::Int64, x.device(), name);
  const Shape kept = reduced_shape(x.sizes(), dims, true);
  const Shape strides = contiguous_strides(kept);
  require_kernel(kernels_for(x.device().type()).arg_reduce, name, x.device())(
      make_view(values, kept, strides, 0, name), make_view(indices, kept, strides, 0, name), x, d,
      is_max);
  return {values, indices};
}

Tensor arg_extreme(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim, bool is_max) {
  if (!dim) {
    Tensor flat = reshape(x, {-1});
    KILN_CHECK_INDEX(flat.numel() > 0, is_max ? "argmax" : "argmin",
                     "(): Expected reduction dim to be specified for input.numel() == 0.");
    Tensor idx = std::get<1>(extreme_dim(flat, 0, false, is_max));
    if (!keepdim) return idx;
    return reshape(idx, Shape(static_cast<std::size_t>(x.dim()), 1));
  }
  return std::get<1>(extreme_dim(x, *dim, keepdim, is_max));
}

}  // namespace

std::tuple<Tensor, Tensor> max_dim(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min_dim(const Tensor& x, std::int64_t dim, bool keepdim) {
  return extreme_dim(x, dim, keepdim, false);
}
Tensor argmax(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, true);
}
Tensor argmin(const Tensor& x, std::optional<std::int64_t> dim, bool keepdim) {
  return arg_extreme(x, dim, keepdim, false);
}

}  // namespace kiln::ops
