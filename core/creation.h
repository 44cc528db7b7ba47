// core/creation.h — every way to make a tensor, and what each does with memory.
//
//   | call                         | memory                               | dtype                    |
//   |------------------------------|--------------------------------------|--------------------------|
//   | tensor(values, opts)         | always a new copy                    | floats -> Float32 default|
//   | from_blob(ptr, ..., owner)   | zero-copy, owner kept alive          | the buffer's own type    |
//   | from_blob_borrowed(ptr, ...) | zero-copy, caller must outlive it    | the buffer's own type    |
//   | as_tensor(x, opts)           | zero-copy when terms allow, else copy| x's own unless opts say  |
//   | empty/zeros/ones/full/...    | new                                  | opts or default          |
//
// Every creation function records its call site (a defaulted std::source_location), so
// errors can say "argument 'input' was created by from_blob at loader.cpp:42".
// See Note [The creation contract] in core/tensor_impl.h.
// Read next: core/io/npy.h (load_npy/save_npy), core/random.h.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <span>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace kiln {

namespace detail {

/// The dtype PyTorch gives a tensor built from C++ values of type T: floating -> the default
/// float dtype, bool -> Bool, other integers -> Int64.
template <class T>
constexpr DType natural_literal_dtype() {
  if constexpr (std::is_same_v<T, bool>) return DType::Bool;
  else if constexpr (std::is_floating_point_v<T>) return DType::Float32;  // replaced by default_dtype()
  else return DType::Int64;
}

/// Copies `numel` values of `source_dtype` at `data` into a new tensor of the options' dtype
/// (default `natural`), converting in the same pass.
Tensor tensor_from_values(const void* data, DType source_dtype, IntArrayRef sizes,
                          bool floating_source, DType natural, const TensorOptions& options,
                          SourceSite site, const char* api);

/// Shares `data` without copying. `owner` frees (or releases) it when the last tensor over
/// it dies; a null owner means borrowed.
Tensor tensor_from_memory(void* data, DType dtype, IntArrayRef sizes,
                          std::optional<IntArrayRef> strides, std::shared_ptr<void> owner,
                          MemoryOrigin origin, const TensorOptions& options, SourceSite site,
                          const char* api);

void check_blob_dtype(DType buffer, const TensorOptions& options);

template <class T>
struct Nested {
  // bool is stored as one byte 0/1 (its in-memory form), since std::vector<bool> packs bits.
  std::vector<std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>> values;
  Shape shape;
};

/// Flattens nested initializer lists, checking that they are rectangular.
template <class T>
void flatten_level(const T& v, std::size_t, Nested<T>& out) {
  out.values.push_back(v);
}
template <class T, class L>
void flatten_level(std::initializer_list<L> list, std::size_t depth, Nested<T>& out) {
  if (out.shape.size() <= depth) {
    out.shape.push_back(static_cast<std::int64_t>(list.size()));
  } else {
    KILN_CHECK_VALUE(out.shape[depth] == static_cast<std::int64_t>(list.size()),
                     "expected sequence of length ", out.shape[depth], " at dim ", depth,
                     " (got ", list.size(), ")");
  }
  for (const L& item : list) flatten_level<T>(item, depth + 1, out);
}

template <class T, class L>
Tensor tensor_from_nested(std::initializer_list<L> list, const TensorOptions& options,
                          SourceSite site) {
  Nested<T> nested;
  flatten_level<T>(list, 0, nested);
  // An empty inner list leaves the deeper dims undiscovered: [[]] is shape [1, 0].
  return tensor_from_values(nested.values.data(), dtype_v<T>, nested.shape,
                            std::is_floating_point_v<T>, natural_literal_dtype<T>(), options, site,
                            "tensor");
}

}  // namespace detail

// --- tensor(): always a deep copy --------------------------------------------------------------

/// A 0-dim tensor holding one value.
template <class T>
  requires std::is_arithmetic_v<T>
Tensor tensor(T value, TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  return detail::tensor_from_values(&value, dtype_v<T>, {}, std::is_floating_point_v<T>,
                                    detail::natural_literal_dtype<T>(), options, loc, "tensor");
}

/// From nested braced lists: `tensor({{1., 2.}, {3., 4.}})`. Ragged lists throw PyTorch's
/// "expected sequence of length 2 at dim 1 (got 1)".
template <class T>
  requires std::is_arithmetic_v<T>
Tensor tensor(std::initializer_list<T> values, TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  return detail::tensor_from_nested<T>(values, options, loc);
}
template <class T>
  requires std::is_arithmetic_v<T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> values, TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  return detail::tensor_from_nested<T>(values, options, loc);
}
template <class T>
  requires std::is_arithmetic_v<T>
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<T>>> values,
              TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  return detail::tensor_from_nested<T>(values, options, loc);
}
template <class T>
  requires std::is_arithmetic_v<T>
Tensor tensor(
    std::initializer_list<std::initializer_list<std::initializer_list<std::initializer_list<T>>>>
        values,
    TensorOptions options = {}, std::source_location loc = std::source_location::current()) {
  return detail::tensor_from_nested<T>(values, options, loc);
}

/// A 1-D copy of a contiguous range. Floating values become the default dtype (Float32)
/// unless `options` say otherwise: the C++ type of the source does not leak into the model.
template <KilnScalar T>
Tensor tensor(std::span<const T> values, TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  return detail::tensor_from_values(values.data(), dtype_v<T>, {n}, !std::is_integral_v<T>,
                                    detail::natural_literal_dtype<T>(), options, loc, "tensor");
}
template <KilnScalar T>
Tensor tensor(const std::vector<T>& values, TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  return tensor(std::span<const T>(values), options, loc);
}
/// A copy of `values` viewed with `sizes` (numel must match).
template <KilnScalar T>
Tensor tensor(const std::vector<T>& values, IntArrayRef sizes, TensorOptions options = {},
              std::source_location loc = std::source_location::current()) {
  KILN_CHECK_VALUE(compute_numel(sizes) == static_cast<std::int64_t>(values.size()),
                   msg::invalid_shape(sizes, static_cast<std::int64_t>(values.size())));
  return detail::tensor_from_values(values.data(), dtype_v<T>, sizes, !std::is_integral_v<T>,
                                    detail::natural_literal_dtype<T>(), options, loc, "tensor");
}

/// A copy of another tensor: new memory, no history (like `t.clone().detach()`), in the
/// tensor's own dtype unless `options` say otherwise.
Tensor tensor(const Tensor& other, TensorOptions options = {},
              std::source_location loc = std::source_location::current());

// --- from_blob(): zero-copy over the caller's memory ----------------------------------------------

/// Shares `data` (no copy). `deleter(data)` runs when the last tensor or view over it dies.
/// The dtype is the pointer's: asking for another one in `options` is an error, never a
/// silent reinterpretation.
template <KilnScalar T>
Tensor from_blob(T* data, IntArrayRef sizes, std::function<void(void*)> deleter,
                 TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  detail::check_blob_dtype(dtype_v<T>, options);
  std::shared_ptr<void> owner(static_cast<void*>(const_cast<std::remove_const_t<T>*>(data)),
                              std::move(deleter));
  return detail::tensor_from_memory(const_cast<std::remove_const_t<T>*>(data), dtype_v<T>, sizes,
                                    std::nullopt, std::move(owner), MemoryOrigin::ZeroCopy,
                                    options, loc, "from_blob");
}
template <KilnScalar T>
Tensor from_blob(T* data, IntArrayRef sizes, IntArrayRef strides,
                 std::function<void(void*)> deleter, TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  detail::check_blob_dtype(dtype_v<T>, options);
  std::shared_ptr<void> owner(static_cast<void*>(const_cast<std::remove_const_t<T>*>(data)),
                              std::move(deleter));
  return detail::tensor_from_memory(const_cast<std::remove_const_t<T>*>(data), dtype_v<T>, sizes,
                                    strides, std::move(owner), MemoryOrigin::ZeroCopy, options,
                                    loc, "from_blob");
}

/// Shares `data` and keeps `owner` alive (e.g. the std::shared_ptr<std::vector<float>> that
/// holds it) until the last tensor or view over it dies.
template <KilnScalar T>
Tensor from_blob(T* data, IntArrayRef sizes, std::shared_ptr<const void> owner,
                 TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  detail::check_blob_dtype(dtype_v<T>, options);
  KILN_CHECK_VALUE(owner != nullptr, "from_blob: the owner is null; use from_blob_borrowed to "
                                     "share memory without keeping it alive");
  return detail::tensor_from_memory(const_cast<std::remove_const_t<T>*>(data), dtype_v<T>, sizes,
                                    std::nullopt, std::const_pointer_cast<void>(owner),
                                    MemoryOrigin::ZeroCopy, options, loc, "from_blob");
}
template <KilnScalar T>
Tensor from_blob(T* data, IntArrayRef sizes, IntArrayRef strides,
                 std::shared_ptr<const void> owner, TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  detail::check_blob_dtype(dtype_v<T>, options);
  KILN_CHECK_VALUE(owner != nullptr, "from_blob: the owner is null; use from_blob_borrowed to "
                                     "share memory without keeping it alive");
  return detail::tensor_from_memory(const_cast<std::remove_const_t<T>*>(data), dtype_v<T>, sizes,
                                    strides, std::const_pointer_cast<void>(owner),
                                    MemoryOrigin::ZeroCopy, options, loc, "from_blob");
}

/// Shares `data` WITHOUT keeping it alive: the caller promises that the buffer outlives every
/// tensor and view made from it. Use-after-free otherwise (AddressSanitizer reports it; see
/// the `dangling-blob` failure case). Prefer from_blob with an owner.
template <KilnScalar T>
Tensor from_blob_borrowed(T* data, IntArrayRef sizes, TensorOptions options = {},
                          std::source_location loc = std::source_location::current()) {
  detail::check_blob_dtype(dtype_v<T>, options);
  return detail::tensor_from_memory(const_cast<std::remove_const_t<T>*>(data), dtype_v<T>, sizes,
                                    std::nullopt, nullptr, MemoryOrigin::Borrowed, options, loc,
                                    "from_blob_borrowed");
}
template <KilnScalar T>
Tensor from_blob_borrowed(T* data, IntArrayRef sizes, IntArrayRef strides,
                          TensorOptions options = {},
                          std::source_location loc = std::source_location::current()) {
  detail::check_blob_dtype(dtype_v<T>, options);
  return detail::tensor_from_memory(const_cast<std::remove_const_t<T>*>(data), dtype_v<T>, sizes,
                                    strides, nullptr, MemoryOrigin::Borrowed, options, loc,
                                    "from_blob_borrowed");
}

// --- as_tensor(): share when the terms allow, copy otherwise ----------------------------------------

/// Returns `x` itself when its dtype and device already match `options` (nothing is
/// created); otherwise a converted copy.
Tensor as_tensor(const Tensor& x, TensorOptions options = {},
                 std::source_location loc = std::source_location::current());

/// Takes ownership of the vector's buffer without copying (the vector is moved into the
/// tensor's storage) when the dtype matches; converts with a copy otherwise.
template <KilnScalar T>
Tensor as_tensor(std::vector<T>&& values, TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  if (options.has_dtype() && options.dtype() != dtype_v<T>) {
    return detail::tensor_from_values(values.data(), dtype_v<T>, {n}, false, dtype_v<T>, options,
                                      loc, "as_tensor");
  }
  auto holder = std::make_shared<std::vector<T>>(std::move(values));
  T* data = holder->data();
  return detail::tensor_from_memory(data, dtype_v<T>, {n}, std::nullopt, std::move(holder),
                                    MemoryOrigin::ZeroCopy, options, loc, "as_tensor");
}

/// Shares the vector's buffer and keeps the vector alive; copies when the dtype differs.
template <KilnScalar T>
Tensor as_tensor(std::shared_ptr<std::vector<T>> values, TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  const std::int64_t n = static_cast<std::int64_t>(values->size());
  if (options.has_dtype() && options.dtype() != dtype_v<T>) {
    return detail::tensor_from_values(values->data(), dtype_v<T>, {n}, false, dtype_v<T>,
                                      options, loc, "as_tensor");
  }
  T* data = values->data();
  return detail::tensor_from_memory(data, dtype_v<T>, {n}, std::nullopt, std::move(values),
                                    MemoryOrigin::ZeroCopy, options, loc, "as_tensor");
}

/// An lvalue vector cannot be kept alive by the tensor, so as_tensor copies it (sharing it
/// would be a borrow: use from_blob_borrowed to opt into that explicitly).
template <KilnScalar T>
Tensor as_tensor(const std::vector<T>& values, TensorOptions options = {},
                 std::source_location loc = std::source_location::current()) {
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  return detail::tensor_from_values(values.data(), dtype_v<T>, {n}, false, dtype_v<T>, options,
                                    loc, "as_tensor");
}

// --- factories -------------------------------------------------------------------------------------

Tensor empty(IntArrayRef sizes, TensorOptions options = {},
             std::source_location loc = std::source_location::current());
Tensor zeros(IntArrayRef sizes, TensorOptions options = {},
             std::source_location loc = std::source_location::current());
Tensor ones(IntArrayRef sizes, TensorOptions options = {},
            std::source_location loc = std::source_location::current());
/// Filled with `value`; without a dtype in `options` the value decides it (2.5 -> Float32,
/// 2 -> Int64, true -> Bool), as in PyTorch.
Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options = {},
            std::source_location loc = std::source_location::current());
/// [0, end) step 1. Integer bounds give Int64; any floating bound gives the default dtype.
Tensor arange(const Scalar& end, TensorOptions options = {},
              std::source_location loc = std::source_location::current());
Tensor arange(const Scalar& start, const Scalar& end, TensorOptions options = {},
              std::source_location loc = std::source_location::current());
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              TensorOptions options = {},
              std::source_location loc = std::source_location::current());
Tensor linspace(const Scalar& start, const Scalar& end, std::int64_t steps,
                TensorOptions options = {},
                std::source_location loc = std::source_location::current());
Tensor eye(std::int64_t n, TensorOptions options = {},
           std::source_location loc = std::source_location::current());
Tensor eye(std::int64_t n, std::int64_t m, TensorOptions options = {},
           std::source_location loc = std::source_location::current());
/// Uniform in [0, 1) from the global generator (see Note [Random streams]).
Tensor rand(IntArrayRef sizes, TensorOptions options = {},
            std::source_location loc = std::source_location::current());
/// Standard normal from the global generator.
Tensor randn(IntArrayRef sizes, TensorOptions options = {},
             std::source_location loc = std::source_location::current());
/// Integers uniform in [low, high) (Int64 unless options say otherwise).
Tensor randint(std::int64_t low, std::int64_t high, IntArrayRef sizes, TensorOptions options = {},
               std::source_location loc = std::source_location::current());

/// Same shape, dtype and device as `t` unless `options` say otherwise.
Tensor empty_like(const Tensor& t, TensorOptions options = {},
                  std::source_location loc = std::source_location::current());
Tensor zeros_like(const Tensor& t, TensorOptions options = {},
                  std::source_location loc = std::source_location::current());
Tensor ones_like(const Tensor& t, TensorOptions options = {},
                 std::source_location loc = std::source_location::current());
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions options = {},
                 std::source_location loc = std::source_location::current());
Tensor rand_like(const Tensor& t, TensorOptions options = {},
                 std::source_location loc = std::source_location::current());
Tensor randn_like(const Tensor& t, TensorOptions options = {},
                  std::source_location loc = std::source_location::current());

}  // namespace kiln
