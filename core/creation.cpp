// core/creation.cpp — the creation paths (see core/creation.h for the table of what each
// does with memory).
#include "core/creation.h"

#include <cmath>
#include <limits>

#include "core/kernels.h"
#include "core/ops/allocate.h"
#include "core/ops/copy.h"
#include "core/ops/random.h"

namespace kiln {

namespace {

/// Allocates the storage for a new tensor of `options`' device (and pinned flag) and wraps
/// it with its creation provenance and requires_grad term.
Tensor new_tensor(IntArrayRef sizes, DType dtype, const TensorOptions& options, SourceSite site,
                  const char* api, MemoryOrigin origin = MemoryOrigin::Allocated) {
  auto storage = Storage::allocate_for(sizes, dtype, options.device(), options.pinned_memory(),
                                       {origin, api, site});
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes.vec(),
                                             contiguous_strides(sizes), 0, dtype,
                                             AutogradTerms{options.requires_grad(), nullptr, 0},
                                             Provenance{TensorOrigin::Created, api, site}));
}

/// A borrowed CPU tensor over a caller's buffer, used only as the source of a copy.
Tensor borrowed_source(const void* data, DType dtype, IntArrayRef sizes) {
  auto storage = std::make_shared<Storage>(
      DataPtr(const_cast<void*>(data), nullptr, nullptr, kCPU),
      static_cast<std::size_t>(compute_numel(sizes)) * itemsize(dtype), false,
      MemoryProvenance{MemoryOrigin::Borrowed, "source", {}});
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes.vec(),
                                             contiguous_strides(sizes), 0, dtype, AutogradTerms{},
                                             Provenance{TensorOrigin::Created, "source", {}}));
}

/// Copies src into the freshly created dst (any devices, any dtypes); not counted as an
/// in-place modification of dst, which nobody has seen yet.
void initialise_from(const Tensor& dst, const Tensor& src) { ops::copy_data(dst, src); }

}  // namespace

namespace detail {

Tensor tensor_from_values(const void* data, DType source_dtype, IntArrayRef sizes,
                          bool floating_source, DType natural, const TensorOptions& options,
                          SourceSite site, const char* api) {
  const DType dtype = options.dtype_or(floating_source ? default_dtype() : natural);
  // One pass: the caller's values are converted while they are copied, so no intermediate
  // tensor of the source type exists (LibTorch stages a Float64 copy of a double buffer).
  Tensor out = new_tensor(sizes, dtype, options, site, api, MemoryOrigin::Copied);
  if (compute_numel(sizes) > 0) initialise_from(out, borrowed_source(data, source_dtype, sizes));
  return out;
}

Tensor tensor_from_memory(void* data, DType dtype, IntArrayRef sizes,
                          std::optional<IntArrayRef> strides, std::shared_ptr<void> owner,
                          MemoryOrigin origin, const TensorOptions& options, SourceSite site,
                          const char* api) {
  if (!strides) storage_nbytes(sizes, itemsize(dtype));  // validates the shape
  const Shape st = strides ? strides->vec() : contiguous_strides(sizes);
  KILN_CHECK_VALUE(st.size() == sizes.size(), api, ": sizes ", sizes, " and strides ",
                   IntArrayRef(st), " must have the same length");
  std::int64_t extent = compute_numel(sizes) == 0 ? 0 : 1;
  for (std::size_t d = 0; d < sizes.size() && extent > 0; ++d) {
    KILN_CHECK_VALUE(st[d] >= 0 && sizes[d] >= 0, api, ": negative sizes or strides are not "
                     "supported (got sizes ", sizes, ", strides ", IntArrayRef(st), ")");
    std::int64_t reach = 0;
    KILN_CHECK_VALUE(!__builtin_mul_overflow(sizes[d] - 1, st[d], &reach) &&
                         !__builtin_add_overflow(extent, reach, &extent),
                     api, ": sizes ", sizes, " and strides ", IntArrayRef(st), " overflow");
  }
  KILN_CHECK_VALUE(data != nullptr || extent == 0, api, ": data pointer is null");
  KILN_CHECK(!options.pinned_memory(), api,
             ": cannot mark caller memory as pinned; copy it with pin_memory() instead");
  // The owner travels in the DataPtr's context; freeing the storage releases it.
  void* context = owner ? new std::shared_ptr<void>(std::move(owner)) : nullptr;
  DeleterFn release = nullptr;
  if (context != nullptr) {
    release = [](void* ctx, void*) { delete static_cast<std::shared_ptr<void>*>(ctx); };
  }
  auto storage = std::make_shared<Storage>(
      DataPtr(data, context, release, options.device()),
      static_cast<std::size_t>(extent) * itemsize(dtype), false,
      MemoryProvenance{origin, api, site});
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes.vec(), st, 0, dtype,
                                             AutogradTerms{options.requires_grad(), nullptr, 0},
                                             Provenance{TensorOrigin::Created, api, site}));
}

void check_blob_dtype(DType buffer, const TensorOptions& options) {
  KILN_CHECK_TYPE(!options.has_dtype() || options.dtype() == buffer,
                  "from_blob: the buffer holds ", scalar_type_name(buffer),
                  " values but the options ask for ", scalar_type_name(options.dtype()),
                  "; from_blob shares the caller's memory and never converts it. Create a copy "
                  "with kiln::tensor(...) (which converts in one pass) or call .to(",
                  options.dtype(), ") on the result.");
}

}  // namespace detail

Tensor tensor(const Tensor& other, TensorOptions options, std::source_location loc) {
  const TensorOptions o =
      options.dtype(options.dtype_or(other.dtype())).device(options.has_device() ? options.device() : other.device());
  Tensor out = new_tensor(other.sizes(), o.dtype(), o, loc, "tensor", MemoryOrigin::Copied);
  initialise_from(out, other);
  return out;
}

Tensor as_tensor(const Tensor& x, TensorOptions options, std::source_location loc) {
  const bool dtype_ok = !options.has_dtype() || options.dtype() == x.dtype();
  const bool device_ok = !options.has_device() || options.device() == x.device();
  if (dtype_ok && device_ok && !options.requires_grad()) return x;
  const TensorOptions o =
      options.dtype(options.dtype_or(x.dtype())).device(options.has_device() ? options.device() : x.device());
  Tensor out = new_tensor(x.sizes(), o.dtype(), o, loc, "as_tensor", MemoryOrigin::Copied);
  initialise_from(out, x);
  return out;
}

Tensor empty(IntArrayRef sizes, TensorOptions options, std::source_location loc) {
  return new_tensor(sizes, options.dtype(), options, loc, "empty");
}

Tensor zeros(IntArrayRef sizes, TensorOptions options, std::source_location loc) {
  Tensor t = new_tensor(sizes, options.dtype(), options, loc, "zeros");
  ops::fill_data(t, 0);
  return t;
}

Tensor ones(IntArrayRef sizes, TensorOptions options, std::source_location loc) {
  Tensor t = new_tensor(sizes, options.dtype(), options, loc, "ones");
  ops::fill_data(t, 1);
  return t;
}

Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options, std::source_location loc) {
  Tensor t = new_tensor(sizes, options.dtype_or(value.natural_dtype()), options, loc, "full");
  ops::fill_data(t, value);
  return t;
}

Tensor arange(const Scalar& end, TensorOptions options, std::source_location loc) {
  return arange(0, end, 1, options, loc);
}

Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options,
              std::source_location loc) {
  return arange(start, end, 1, options, loc);
}

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions options,
              std::source_location loc) {
  const bool floating = start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  const DType dtype = options.dtype_or(floating ? default_dtype() : DType::Int64);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  KILN_CHECK_VALUE(st != 0.0, "step must be nonzero");
  KILN_CHECK_VALUE(std::isfinite(s) && std::isfinite(e), "unsupported range: ", start, " -> ", end);
  KILN_CHECK_VALUE((st > 0 && e >= s) || (st < 0 && e <= s),
                   "upper bound and larger bound inconsistent with step sign");
  // PyTorch's checks, in its order. The count is a double first: converting one past int64's
  // range (arange(0, 1e20), or a step of 1e-300) to an integer is undefined behaviour.
  const double count = std::ceil((e - s) / st);
  KILN_CHECK_VALUE(count >= 0 && count < static_cast<double>(std::numeric_limits<std::int64_t>::max()),
                   "invalid size, possible overflow?");
  const auto n = static_cast<std::int64_t>(count);
  Tensor t = new_tensor({n}, dtype, options, loc, "arange");
  if (n > 0) {
    require_kernel(kernels_for(t.device().type()).arange, "arange", t.device())(t, start, step);
  }
  return t;
}

Tensor linspace(const Scalar& start, const Scalar& end, std::int64_t steps, TensorOptions options,
                std::source_location loc) {
  KILN_CHECK_VALUE(steps >= 0, "number of steps must be non-negative");
  const DType dtype = options.dtype();
  const double s = start.to_double(), e = end.to_double();
  const double step = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0.0;
  Tensor t = new_tensor({steps}, dtype, options, loc, "linspace");
  if (steps > 0) {
    require_kernel(kernels_for(t.device().type()).arange, "linspace", t.device())(t, s, step);
  }
  return t;
}

Tensor eye(std::int64_t n, TensorOptions options, std::source_location loc) {
  return eye(n, n, options, loc);
}

Tensor eye(std::int64_t n, std::int64_t m, TensorOptions options, std::source_location loc) {
  KILN_CHECK_VALUE(n >= 0, "n must be greater or equal to 0, got ", n);
  KILN_CHECK_VALUE(m >= 0, "m must be greater or equal to 0, got ", m);
  Tensor t = new_tensor({n, m}, options.dtype(), options, loc, "eye");
  ops::fill_data(t, 0);
  // The diagonal is a strided view with stride m + 1: fill it in place.
  const std::int64_t k = std::min(n, m);
  if (k > 0) ops::fill_data(ops::make_view(t, {k}, {m + 1}, 0, "eye"), 1);
  return t;
}

Tensor rand(IntArrayRef sizes, TensorOptions options, std::source_location loc) {
  Tensor t = new_tensor(sizes, options.dtype(), options, loc, "rand");
  ops::random_data(t, RandomKind::Uniform, 0.0, 1.0);
  return t;
}

Tensor randn(IntArrayRef sizes, TensorOptions options, std::source_location loc) {
  Tensor t = new_tensor(sizes, options.dtype(), options, loc, "randn");
  ops::random_data(t, RandomKind::Normal, 0.0, 1.0);
  return t;
}

Tensor randint(std::int64_t low, std::int64_t high, IntArrayRef sizes, TensorOptions options,
               std::source_location loc) {
  Tensor t = new_tensor(sizes, options.dtype_or(DType::Int64), options, loc, "randint");
  ops::random_data(t, RandomKind::IntRange, static_cast<double>(low), static_cast<double>(high));
  return t;
}

namespace {
TensorOptions like(const Tensor& t, const TensorOptions& options) {
  return options.dtype(options.dtype_or(t.dtype()))
      .device(options.has_device() ? options.device() : t.device());
}
}  // namespace

Tensor empty_like(const Tensor& t, TensorOptions options, std::source_location loc) {
  return empty(t.sizes(), like(t, options), loc);
}
Tensor zeros_like(const Tensor& t, TensorOptions options, std::source_location loc) {
  return zeros(t.sizes(), like(t, options), loc);
}
Tensor ones_like(const Tensor& t, TensorOptions options, std::source_location loc) {
  return ones(t.sizes(), like(t, options), loc);
}
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions options, std::source_location loc) {
  return full(t.sizes(), value, like(t, options), loc);
}
Tensor rand_like(const Tensor& t, TensorOptions options, std::source_location loc) {
  return rand(t.sizes(), like(t, options), loc);
}
Tensor randn_like(const Tensor& t, TensorOptions options, std::source_location loc) {
  return randn(t.sizes(), like(t, options), loc);
}

}  // namespace kiln
