// core/ops/checks.cpp — shared argument checks.
#include "core/ops/checks.h"

#include <algorithm>

#include "core/capture_hooks.h"
#include "core/ops/allocate.h"
#include "core/ops/reduce.h"

namespace kiln::ops {

namespace {
bool joins_any_device(const Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }
}  // namespace

Device common_device(std::initializer_list<NamedArg> args) {
  const NamedArg* anchor = nullptr;
  for (const NamedArg& a : args) {
    if (a.second == nullptr || !a.second->defined()) continue;
    if (anchor == nullptr) {
      anchor = &a;
      continue;
    }
    const Tensor& t = *a.second;
    const Tensor& u = *anchor->second;
    if (t.device() == u.device()) continue;
    if (joins_any_device(t)) continue;
    if (joins_any_device(u)) {
      anchor = &a;
      continue;
    }
    KILN_FAIL(msg::same_device(anchor->first, u, a.first, t));
  }
  KILN_CHECK(anchor != nullptr, "expected at least one defined tensor argument");
  return anchor->second->device();
}

void check_floating(const char* op, const Tensor& t, const char* arg) {
  KILN_CHECK_TYPE(t.is_floating_point(), op, ": expected a floating point tensor for argument '",
                  arg, "', but got ", scalar_type_name(t.dtype()), "\n", msg::blame(arg, t));
}

void check_index_dtype(const char* op, const Tensor& index) {
  KILN_CHECK_TYPE(index.dtype() == DType::Int64, op, "(): Expected dtype int64 for index (got ",
                  scalar_type_name(index.dtype()), ")\n", msg::blame("index", index));
}

void check_index_range(const Tensor& index, std::int64_t dim, std::int64_t size) {
  if (index.numel() == 0 || !has_data(index.device())) return;
  // It reads the index on the host: a captured step checks again at each replay.
  capture::Region region("check_index_range", [index, dim, size] { check_index_range(index, dim, size); }, {&index});
  std::int64_t lo = 0, hi = 0;
  if (index.is_cpu() && index.is_contiguous()) {
    // One pass on the host: no reduction kernels, no allocation.
    const std::int64_t* p = index.data_ptr<std::int64_t>();
    lo = hi = p[0];
    for (std::int64_t i = 1; i < index.numel(); ++i) {
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
    }
  } else {
    lo = amin(index, {}, false).item<std::int64_t>();
    hi = amax(index, {}, false).item<std::int64_t>();
  }
  KILN_CHECK_INDEX(lo >= 0, msg::index_out_of_bounds(lo, dim, size));
  KILN_CHECK_INDEX(hi < size, msg::index_out_of_bounds(hi, dim, size));
}

}  // namespace kiln::ops
