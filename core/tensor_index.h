// core/tensor_index.h — Python's x[...] for C++, LibTorch's spelling:
//
//   using namespace kiln::indexing;
//   x.index({Slice(), Slice(1, 3)})        // x[:, 1:3]
//   x.index({0, Ellipsis, None})           // x[0, ..., None]
//   x.index({Slice(None, None, 2), idx})   // x[::2, idx]   (idx: a 1-D Int64 tensor)
//
// Every result is built from the view ops (select, slice, unsqueeze) and index_select, so it
// is a view where Python's would be one, and differentiable.
// Read next: autograd/functions/view.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>

#include "core/tensor.h"

namespace kiln::indexing {

/// Python's `...`.
struct EllipsisIndex {};
inline constexpr EllipsisIndex Ellipsis{};
/// Python's `None` inside an index: a new dim of size 1.
struct NoneIndex {
  /// A missing slice bound, as in Slice(None, None, 2).
  operator std::optional<std::int64_t>() const { return std::nullopt; }  // NOLINT: implicit
};
inline constexpr NoneIndex None{};

/// Python's start:stop:step (bounds may be omitted, negative counts from the end).
struct Slice {
  Slice(std::optional<std::int64_t> start = std::nullopt, std::optional<std::int64_t> stop = std::nullopt,
        std::int64_t step = 1)
      : start(start), stop(stop), step(step) {}
  std::optional<std::int64_t> start, stop;
  std::int64_t step;
};

/// One entry of an index: an integer, a Slice, Ellipsis, None, or a 1-D Int64 tensor.
class TensorIndex {
 public:
  TensorIndex(std::int64_t i) : value_(i) {}              // NOLINT: implicit
  TensorIndex(int i) : value_(std::int64_t{i}) {}         // NOLINT: implicit
  TensorIndex(Slice s) : value_(s) {}                     // NOLINT: implicit
  TensorIndex(EllipsisIndex e) : value_(e) {}             // NOLINT: implicit
  TensorIndex(NoneIndex n) : value_(n) {}                 // NOLINT: implicit
  TensorIndex(const Tensor& t) : value_(t) {}             // NOLINT: implicit
  const std::variant<std::int64_t, Slice, EllipsisIndex, NoneIndex, Tensor>& value() const { return value_; }

 private:
  std::variant<std::int64_t, Slice, EllipsisIndex, NoneIndex, Tensor> value_;
};

}  // namespace kiln::indexing
