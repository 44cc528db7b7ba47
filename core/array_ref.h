// core/array_ref.h — IntArrayRef: a non-owning view of int64 values (sizes, strides, dims)
// that also accepts a braced list, so `zeros({2, 3})` and `x.sum({0, 1})` read like Python.
// std::span cannot be built from `{2, 3}` before C++26, hence this small class.
// Like any view it must not outlive what it points to; a braced list lives until the end of
// the full expression, which covers every function argument.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <vector>

#include "core/small_vector.h"

namespace kiln {

/// The shape (or strides) of a tensor, owned. Up to 6 dims live inline (see
/// core/small_vector.h for why this matters).
using Shape = SmallVector<std::int64_t, 6>;

class IntArrayRef {
 public:
  constexpr IntArrayRef() = default;
  constexpr IntArrayRef(const std::int64_t* data, std::size_t size) : data_(data), size_(size) {}
  constexpr IntArrayRef(const std::initializer_list<std::int64_t>& list)  // NOLINT: implicit
      : data_(list.size() == 0 ? nullptr : std::data(list)), size_(list.size()) {}
  IntArrayRef(const std::vector<std::int64_t>& v)  // NOLINT: implicit
      : data_(v.data()), size_(v.size()) {}
  IntArrayRef(const Shape& v)  // NOLINT: implicit
      : data_(v.data()), size_(v.size()) {}
  constexpr IntArrayRef(std::span<const std::int64_t> s)  // NOLINT: implicit
      : data_(s.data()), size_(s.size()) {}
  /// A single value is a one-element list, as in PyTorch's IntArrayRef.
  constexpr IntArrayRef(const std::int64_t& single)  // NOLINT: implicit
      : data_(&single), size_(1) {}

  constexpr const std::int64_t* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr const std::int64_t* begin() const { return data_; }
  constexpr const std::int64_t* end() const { return data_ + size_; }
  constexpr std::int64_t operator[](std::size_t i) const { return data_[i]; }
  constexpr std::int64_t back() const { return data_[size_ - 1]; }
  Shape vec() const { return Shape(begin(), end()); }
  constexpr IntArrayRef slice(std::size_t start, std::size_t len) const {
    return {data_ + start, len};
  }

  friend bool operator==(IntArrayRef a, IntArrayRef b) {
    if (a.size_ != b.size_) return false;
    for (std::size_t i = 0; i < a.size_; ++i)
      if (a.data_[i] != b.data_[i]) return false;
    return true;
  }

 private:
  const std::int64_t* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Prints "[2, 3]".
std::ostream& operator<<(std::ostream& os, IntArrayRef a);

}  // namespace kiln
