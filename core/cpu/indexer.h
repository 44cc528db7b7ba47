// core/cpu/indexer.h — maps a linear index over some dims of a strided tensor to an element
// offset. Used by kernels that walk "every position except along one dim" (reductions,
// gather/scatter, index_select).
#pragma once

#include <cstdint>
#include <vector>

#include "core/array_ref.h"

namespace kiln::cpu {

class StridedIndexer {
 public:
  StridedIndexer() = default;
  StridedIndexer(std::vector<std::int64_t> sizes, std::vector<std::int64_t> strides)
      : sizes_(std::move(sizes)), strides_(std::move(strides)) {}

  /// Element offset of the i-th position in row-major order over the dims.
  std::int64_t offset(std::int64_t i) const {
    std::int64_t off = 0;
    for (std::size_t d = sizes_.size(); d-- > 0;) {
      off += (i % sizes_[d]) * strides_[d];
      i /= sizes_[d];
    }
    return off;
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto s : sizes_) n *= s;
    return n;
  }

 private:
  std::vector<std::int64_t> sizes_;
  std::vector<std::int64_t> strides_;
};

/// The indexer over every dim of (sizes, strides) except `skip_dim`.
inline StridedIndexer indexer_without_dim(IntArrayRef sizes, IntArrayRef strides,
                                          std::int64_t skip_dim) {
  std::vector<std::int64_t> s, st;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (static_cast<std::int64_t>(d) == skip_dim) continue;
    s.push_back(sizes[d]);
    st.push_back(strides[d]);
  }
  return {std::move(s), std::move(st)};
}

}  // namespace kiln::cpu
