// core/cpu/rows.h — what the CPU's row-wise kernels (the LSTM cell, softmax, layer norm) share:
// Eigen views of one contiguous row, how many rows make a task worth a thread, and a per-thread
// scratch row.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>

#include "core/cpu/parallel.h"

namespace kiln::cpu {

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

/// Rows per task: about kGrainSize elements each.
inline std::int64_t rows_per_task(std::int64_t row_elements) {
  return std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(row_elements, 1));
}

/// `n` values of this thread's scratch for type T (reused by every kernel on the thread: a
/// kernel must be done with it before it calls another that takes it).
template <class T>
Eigen::Array<T, Eigen::Dynamic, 1>& scratch_row(std::int64_t n) {
  thread_local Eigen::Array<T, Eigen::Dynamic, 1> row;
  row.resize(n);
  return row;
}

}  // namespace kiln::cpu
