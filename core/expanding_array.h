// core/expanding_array.h — ExpandingArray<N>: N integers (a kernel size, stride, padding,
// dilation) that a caller may give as one integer, a braced list or an array, as in LibTorch
// (torch::ExpandingArray) and Python (kernel_size=2 or (2, 2)):
//
//   max_pool2d(x, 2);                 // {2, 2}
//   max_pool2d(x, {3, 3}, {2, 2});    // kernel 3x3, stride 2
//   nn::Conv2dOptions{.padding = 1};
//
// Read next: autograd/functions/nn.h (its users).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "core/error.h"

namespace kiln {

template <std::size_t N>
class ExpandingArray {
 public:
  /// One value for every dimension.
  ExpandingArray(std::int64_t value) { values_.fill(value); }  // NOLINT: implicit, as in LibTorch
  /// N values, or one to expand.
  ExpandingArray(std::initializer_list<std::int64_t> values)  // NOLINT: implicit
      : ExpandingArray(std::vector<std::int64_t>(values)) {}
  ExpandingArray(const std::vector<std::int64_t>& values) {  // NOLINT: implicit
    KILN_CHECK_VALUE(values.size() == N || values.size() == 1, "expected ", N, " values (or one to repeat), got ",
                     values.size());
    if (values.size() == 1) values_.fill(values[0]);
    else std::copy(values.begin(), values.end(), values_.begin());
  }
  ExpandingArray(const std::array<std::int64_t, N>& values) : values_(values) {}  // NOLINT: implicit

  std::int64_t operator[](std::size_t i) const { return values_[i]; }
  std::int64_t& operator[](std::size_t i) { return values_[i]; }
  static constexpr std::size_t size() { return N; }
  const std::array<std::int64_t, N>& array() const { return values_; }
  operator const std::array<std::int64_t, N>&() const { return values_; }  // NOLINT: implicit
  auto begin() const { return values_.begin(); }
  auto end() const { return values_.end(); }
  friend bool operator==(const ExpandingArray& a, const ExpandingArray& b) { return a.values_ == b.values_; }

 private:
  std::array<std::int64_t, N> values_{};
};

/// An ExpandingArray that may be left unset — pooling's stride, which then defaults to the
/// kernel size. Takes what ExpandingArray takes, or std::nullopt. (std::optional<ExpandingArray>
/// would refuse a braced list: max_pool2d(x, {2, 2}, {2, 2}) must compile.)
template <std::size_t N>
class OptionalExpandingArray {
 public:
  OptionalExpandingArray() = default;
  OptionalExpandingArray(std::nullopt_t) {}                                          // NOLINT: implicit
  OptionalExpandingArray(std::int64_t value) : value_(ExpandingArray<N>(value)) {}  // NOLINT: implicit
  OptionalExpandingArray(std::initializer_list<std::int64_t> values)                 // NOLINT: implicit
      : value_(ExpandingArray<N>(values)) {}
  OptionalExpandingArray(const std::array<std::int64_t, N>& values) : value_(ExpandingArray<N>(values)) {}  // NOLINT
  OptionalExpandingArray(const ExpandingArray<N>& values) : value_(values) {}       // NOLINT: implicit
  OptionalExpandingArray(const std::optional<ExpandingArray<N>>& values) : value_(values) {}  // NOLINT: implicit

  bool has_value() const { return value_.has_value(); }
  ExpandingArray<N> value_or(const ExpandingArray<N>& fallback) const { return value_.value_or(fallback); }

 private:
  std::optional<ExpandingArray<N>> value_;
};

}  // namespace kiln
