// core/cpu/index.cpp — CPU kernels that move elements by index: cat, index_select,
// index_add, gather, scatter. Index values arrive validated by the op front-ends.
// Read next: core/cpu/im2col.cpp.
#include <cstring>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/indexer.h"
#include "core/cpu/parallel.h"
#include "core/dispatch.h"
#include "core/ops/allocate.h"

namespace kiln::cpu {

void cat_kernel(const Tensor& out, const TensorList& inputs, std::int64_t dim) {
  std::int64_t offset = 0;
  const auto elem_offset = out.strides()[dim];
  for (const Tensor& t : inputs) {
    const std::int64_t n = t.sizes()[dim];
    if (t.numel() > 0) {
      Tensor slot = ops::make_view(out, t.sizes(), out.strides(), offset * elem_offset, "cat");
      copy_kernel(slot, t);
    }
    offset += n;
  }
}

// in and out are contiguous (the front-end makes them so).
void index_select_kernel(const Tensor& out, const Tensor& in, std::int64_t dim,
                         const Tensor& index) {
  const DimSplit s = split_at_dim(in.sizes(), dim);
  const std::int64_t count = index.numel();
  const std::int64_t* idx = index.data_ptr<std::int64_t>();
  const std::size_t row = static_cast<std::size_t>(s.inner) * in.element_size();
  const char* src = static_cast<const char*>(in.raw_data_ptr());
  char* dst = static_cast<char*>(out.raw_data_ptr());
  parallel_for(0, s.outer * count, std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(s.inner, 1)),
               [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k) {
      const std::int64_t o = k / count, i = k % count;
      std::memcpy(dst + static_cast<std::size_t>(k) * row,
                  src + static_cast<std::size_t>(o * s.size + idx[i]) * row, row);
    }
  });
}

// out and source are contiguous; duplicate indices accumulate, so the loop over indices is
// serial and the rows are split across threads instead.
void index_add_kernel(const Tensor& out, std::int64_t dim, const Tensor& index,
                      const Tensor& source) {
  dispatch_dtype<NumericTypes>(out.dtype(), "index_add_cpu", [&]<typename T>() {
    const DimSplit s = split_at_dim(out.sizes(), dim);
    const std::int64_t count = index.numel();
    const std::int64_t* idx = index.data_ptr<std::int64_t>();
    T* o = out.data_ptr<T>();
    const T* src = source.data_ptr<T>();
    parallel_for(0, s.inner, kGrainSize, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t outer = 0; outer < s.outer; ++outer) {
        for (std::int64_t i = 0; i < count; ++i) {
          T* orow = o + (outer * s.size + idx[i]) * s.inner;
          const T* srow = src + (outer * count + i) * s.inner;
          for (std::int64_t j = b; j < e; ++j) {
            orow[j] = static_cast<T>(functors::wrapping_add(static_cast<OpMath<T>>(orow[j]), static_cast<OpMath<T>>(srow[j])));
          }
        }
      }
    });
  });
}

void gather_kernel(const Tensor& out, const Tensor& in, std::int64_t dim, const Tensor& index) {
  dispatch_dtype<AllTypes>(out.dtype(), "gather_cpu", [&]<typename T>() {
    // Positions are those of `index`; the input is addressed with its own strides.
    const StridedIndexer idx_pos = indexer_without_dim(index.sizes(), index.strides(), dim);
    const StridedIndexer in_pos = indexer_without_dim(index.sizes(), in.strides(), dim);
    const StridedIndexer out_pos = indexer_without_dim(out.sizes(), out.strides(), dim);
    const std::int64_t n = index.sizes()[dim];
    const std::int64_t is = index.strides()[dim], xs = in.strides()[dim], os = out.strides()[dim];
    const std::int64_t* idx = index.data_ptr<std::int64_t>();
    const T* x = in.data_ptr<T>();
    T* o = out.data_ptr<T>();
    parallel_for(0, idx_pos.numel(), std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(n, 1)),
                 [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t p = b; p < e; ++p) {
        const std::int64_t* ip = idx + idx_pos.offset(p);
        const T* xp = x + in_pos.offset(p);
        T* op = o + out_pos.offset(p);
        for (std::int64_t j = 0; j < n; ++j) op[j * os] = xp[ip[j * is] * xs];
      }
    });
  });
}

void scatter_kernel(const Tensor& out, std::int64_t dim, const Tensor& index, const Tensor& src,
                    bool accumulate) {
  dispatch_dtype<AllTypes>(out.dtype(), "scatter_cpu", [&]<typename T>() {
    const StridedIndexer idx_pos = indexer_without_dim(index.sizes(), index.strides(), dim);
    const StridedIndexer src_pos = indexer_without_dim(index.sizes(), src.strides(), dim);
    const StridedIndexer out_pos = indexer_without_dim(index.sizes(), out.strides(), dim);
    const std::int64_t n = index.sizes()[dim];
    const std::int64_t is = index.strides()[dim], ss = src.strides()[dim], os = out.strides()[dim];
    const std::int64_t* idx = index.data_ptr<std::int64_t>();
    const T* s = src.data_ptr<T>();
    T* o = out.data_ptr<T>();
    // Each position p (all coordinates but dim) writes only along its own line of `out`, so
    // lines run in parallel; within a line two indices may hit the same element, so the j loop
    // stays in order (accumulate, or last write wins for plain scatter, as PyTorch leaves it).
    parallel_for(0, idx_pos.numel(), std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(n, 1)),
                 [&](std::int64_t pb, std::int64_t pe) {
    for (std::int64_t p = pb; p < pe; ++p) {
      const std::int64_t* ip = idx + idx_pos.offset(p);
      const T* sp = s + src_pos.offset(p);
      T* op = o + out_pos.offset(p);
      for (std::int64_t j = 0; j < n; ++j) {
        T& dst = op[ip[j * is] * os];
        if (accumulate) {
          dst = static_cast<T>(functors::wrapping_add(static_cast<OpMath<T>>(dst), static_cast<OpMath<T>>(sp[j * ss])));
        } else {
          dst = sp[j * ss];
        }
      }
    }
    });
  });
}

}  // namespace kiln::cpu
