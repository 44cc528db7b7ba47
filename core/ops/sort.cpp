// core/ops/sort.cpp — sort_indices (see core/ops/sort.h).
#include "core/ops/sort.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"
#include "core/shape.h"

namespace kiln::ops {

namespace {

/// Sorts each contiguous row of `n` keys, writing the permutation into `out`.
template <class Key>
void sort_rows(const Key* keys, std::int64_t rows, std::int64_t n, bool descending, std::int64_t* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const Key* row = keys + r * n;
    std::int64_t* order = out + r * n;
    std::iota(order, order + n, std::int64_t{0});
    // NaN sorts above everything (PyTorch's order); ties keep their original order.
    auto less = [row](std::int64_t a, std::int64_t b) {
      if constexpr (std::is_floating_point_v<Key>) {
        if (std::isnan(row[a])) return false;
        if (std::isnan(row[b])) return true;
      }
      return row[a] < row[b];
    };
    if (descending) std::stable_sort(order, order + n, [&](std::int64_t a, std::int64_t b) { return less(b, a); });
    else std::stable_sort(order, order + n, less);
  }
}

/// Per row of `n` keys: the position of the row's mode (see mode_indices).
template <class Key>
void mode_rows(const Key* keys, std::int64_t rows, std::int64_t n, std::int64_t* out) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    const Key* row = keys + r * n;
    sort_rows(row, 1, n, false, order.data());
    auto same = [row](std::int64_t a, std::int64_t b) {
      if constexpr (std::is_floating_point_v<Key>) {
        if (std::isnan(row[a]) && std::isnan(row[b])) return true;
      }
      return row[a] == row[b];
    };
    std::int64_t best_count = 0, best = 0;
    for (std::int64_t start = 0; start < n;) {
      std::int64_t end = start + 1;
      while (end < n && same(order[static_cast<std::size_t>(start)], order[static_cast<std::size_t>(end)])) ++end;
      // Strictly more frequent: the smallest value wins a tie. Its last position (the stable
      // sort keeps equal values in order) is the index.
      if (end - start > best_count) {
        best_count = end - start;
        best = order[static_cast<std::size_t>(end - 1)];
      }
      start = end;
    }
    out[r] = best;
  }
}

}  // namespace

Tensor mode_indices(const Tensor& x, std::int64_t dim) {
  if (x.dim() == 0) return zeros({}, TensorOptions().dtype(kInt64).device(x.device()));
  const std::int64_t d = wrap_dim(dim, x.dim());
  KILN_CHECK_INDEX(x.size(d) > 0, "mode(): Expected reduction dim ", d, " to have non-zero size.");
  const DType key_type = x.is_floating_point() ? kFloat64 : kInt64;
  const Tensor keys = ops::contiguous(ops::transpose(ops::to_dtype(ops::to_device(x, kCPU, false), key_type), d, -1));
  const std::int64_t n = keys.size(-1);
  Shape out_sizes = keys.sizes().vec();
  out_sizes.back() = 1;
  Tensor out = empty(out_sizes, kInt64);
  if (key_type == kFloat64) mode_rows(keys.data_ptr<double>(), keys.numel() / n, n, out.data_ptr<std::int64_t>());
  else mode_rows(keys.data_ptr<std::int64_t>(), keys.numel() / n, n, out.data_ptr<std::int64_t>());
  return ops::to_device(ops::contiguous(ops::transpose(out, d, -1)), x.device(), false);
}

Tensor sort_indices(const Tensor& x, std::int64_t dim, bool descending) {
  if (x.dim() == 0) return zeros({}, TensorOptions().dtype(kInt64).device(x.device()));
  const std::int64_t d = wrap_dim(dim, x.dim());
  // Keys as double (floating types: exact) or Int64 (integers: exact), the sorted dim last.
  const DType key_type = x.is_floating_point() ? kFloat64 : kInt64;
  const Tensor keys = ops::contiguous(ops::transpose(ops::to_dtype(ops::to_device(x, kCPU, false), key_type), d, -1));
  const std::int64_t n = keys.size(-1);
  const std::int64_t rows = n == 0 ? 0 : keys.numel() / n;
  Tensor order = empty(keys.sizes(), kInt64);
  if (key_type == kFloat64) sort_rows(keys.data_ptr<double>(), rows, n, descending, order.data_ptr<std::int64_t>());
  else sort_rows(keys.data_ptr<std::int64_t>(), rows, n, descending, order.data_ptr<std::int64_t>());
  return ops::to_device(ops::contiguous(ops::transpose(order, d, -1)), x.device(), false);
}

}  // namespace kiln::ops
