// core/tensor.cpp — the Tensor accessors that belong to core: sizes, data access, item(),
// provenance text and memory overlap. Op methods are defined in autograd/ (Note [Layering]).
#include "core/tensor.h"

#include <algorithm>

#include "core/dispatch.h"
#include "core/ops/copy.h"
#include "core/shape.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, IntArrayRef a) {
  os << '[';
  for (std::size_t i = 0; i < a.size(); ++i) os << (i ? ", " : "") << a[i];
  return os << ']';
}

std::int64_t Tensor::size(std::int64_t d) const { return sizes()[wrap_dim(d, dim())]; }
std::int64_t Tensor::stride(std::int64_t d) const { return strides()[wrap_dim(d, dim())]; }

TensorOptions Tensor::options() const {
  return TensorOptions().dtype(dtype()).device(device());
}

void Tensor::check_data_access(DType requested) const {
  const TensorImpl& t = checked();
  if (t.dtype() != requested) {
    detail::throw_error<TypeError>(std::source_location::current(),
                                   msg::scalar_type(requested, t.dtype()),
                                   " (data_ptr<", scalar_type_name(requested), "> asked of a ",
                                   t.dtype(), " tensor)\n", msg::blame("self", *this));
  }
  KILN_CHECK(!t.device().is_meta(), "Cannot access data pointer of Tensor on the meta device "
                                    "(meta tensors have shapes and dtypes but no data)");
}

Scalar Tensor::item(std::source_location where) const {
  if (capture::observer()) capture::host_access(*this, "item", where);
  const TensorImpl& t = checked();
  KILN_CHECK(t.numel() == 1, "a Tensor with ", t.numel(),
             " elements cannot be converted to Scalar");
  KILN_CHECK(!t.device().is_meta(), "Tensor.item() cannot be called on meta tensors");
  if (!t.device().is_cpu()) return ops::to_device(*this, kCPU, false).item(where);
  return dispatch_dtype<AllTypes>(t.dtype(), "item", [&]<typename T>() -> Scalar {
    const T v = *static_cast<const T*>(t.data());
    if constexpr (std::is_integral_v<T>) {
      return Scalar(v);  // bool stays bool, integers stay exact
    } else {
      return Scalar(convert<double>(v));
    }
  });
}

namespace {

std::string memory_text(const Storage& s) {
  const MemoryProvenance& m = s.provenance();
  std::string where = m.site.known() ? " at " + m.site.str() : "";
  switch (m.origin) {
    case MemoryOrigin::Allocated: return detail::str_cat("memory allocated by ", m.api, where);
    case MemoryOrigin::Copied: return detail::str_cat("a copy made by ", m.api, where);
    case MemoryOrigin::ZeroCopy:
      return detail::str_cat("the caller's buffer, shared zero-copy by ", m.api, where,
                             " and kept alive by its owner");
    case MemoryOrigin::Borrowed:
      return detail::str_cat("the caller's buffer, borrowed by ", m.api, where,
                             " (the caller must keep it alive)");
    case MemoryOrigin::MemoryMapped:
      return detail::str_cat("a file memory-mapped by ", m.api, where);
  }
  return "unknown memory";
}

}  // namespace

std::string Tensor::describe() const {
  const TensorImpl& t = checked();
  const Provenance& p = t.provenance();
  const std::string where = p.site.known() ? " at " + p.site.str() : "";
  switch (p.origin) {
    case TensorOrigin::Created: {
      std::string s = detail::str_cat("created by ", p.api, where);
      const MemoryOrigin m = t.storage()->provenance().origin;
      if (m != MemoryOrigin::Allocated && m != MemoryOrigin::Copied) {
        s += detail::str_cat(" (", origin_name(m), " memory)");
      }
      return s;
    }
    case TensorOrigin::View:
      return detail::str_cat("a view (", p.api, ") of ", memory_text(*t.storage()));
    case TensorOrigin::OpOutput: return detail::str_cat("the output of ", p.api, where);
    case TensorOrigin::Detached:
      return detail::str_cat("created by ", p.api, where, " over ", memory_text(*t.storage()));
    case TensorOrigin::WrappedNumber: return "a C++ number wrapped into a 0-dim tensor";
  }
  return "of unknown origin";
}

bool Tensor::shares_memory(const Tensor& other) const {
  const TensorImpl& a = checked();
  const TensorImpl& b = other.checked();
  if (a.numel() == 0 || b.numel() == 0 || a.device() != b.device()) return false;
  if (a.storage() == b.storage()) return true;
  const char* base_a = static_cast<const char*>(a.storage()->data());
  const char* base_b = static_cast<const char*>(b.storage()->data());
  if (base_a == nullptr || base_b == nullptr) return false;
  // Different Storage objects can still cover the same bytes (two from_blob over one buffer).
  return base_a < base_b + b.storage()->nbytes() && base_b < base_a + a.storage()->nbytes();
}

}  // namespace kiln
