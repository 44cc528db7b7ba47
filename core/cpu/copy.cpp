// core/cpu/copy.cpp — copy (with dtype conversion and broadcasting), fill and arange on the
// CPU. Copy is what to(), contiguous(), clone() and tensor() come down to, so same-dtype
// contiguous copies take the memcpy path, split across threads for large tensors.
// Read next: core/cpu/reduce.cpp.
#include <cstring>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"

namespace kiln::cpu {

void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() &&
      dst.sizes() == src.sizes()) {
    char* d = static_cast<char*>(dst.raw_data_ptr());
    const char* s = static_cast<const char*>(src.raw_data_ptr());
    const auto item = static_cast<std::int64_t>(dst.element_size());
    // Large copies use both cores: one thread does not saturate memory bandwidth here.
    parallel_for(0, dst.numel(), 4 * kGrainSize, [&](std::int64_t b, std::int64_t e) {
      std::memcpy(d + b * item, s + b * item, static_cast<std::size_t>((e - b) * item));
    });
    return;
  }
  dispatch_dtype<AllTypes>(dst.dtype(), "copy_cpu", [&]<typename D>() {
    dispatch_dtype<AllTypes>(src.dtype(), "copy_cpu", [&]<typename S>() {
      cpu_map<D, S>([](S v) { return convert<D>(v); }, dst, {&src});
    });
  });
}

void fill_kernel(const Tensor& dst, const Scalar& value) {
  dispatch_dtype<AllTypes>(dst.dtype(), "fill_cpu", [&]<typename T>() {
    const T v = value.to<T>();
    if (dst.is_contiguous()) {
      T* d = dst.data_ptr<T>();
      parallel_for(0, dst.numel(), kGrainSize, [&](std::int64_t b, std::int64_t e) {
        std::fill(d + b, d + e, v);
      });
      return;
    }
    cpu_map<T>([v]() { return v; }, dst, {});
  });
}

void arange_kernel(const Tensor& out, const Scalar& start, const Scalar& step) {
  dispatch_dtype<NumericTypes>(out.dtype(), "arange_cpu", [&]<typename T>() {
    T* o = out.data_ptr<T>();
    const std::int64_t n = out.numel();
    if constexpr (std::is_integral_v<T>) {
      const std::int64_t s0 = start.to_int(), st = step.to_int();
      for (std::int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(functors::wrapping_add(s0, functors::wrapping_mul(i, st)));
    } else {
      // Computed in double from the index (not by repeated addition) so that large ranges
      // do not drift.
      const double s0 = start.to_double(), st = step.to_double();
      for (std::int64_t i = 0; i < n; ++i) o[i] = convert<T>(s0 + static_cast<double>(i) * st);
    }
  });
}

}  // namespace kiln::cpu
