// core/dtype.cpp — names and the promotion lattice of DType.
// See Note [Type promotion] in core/type_promotion.h for how operands' categories combine.
#include "core/dtype.h"

#include <atomic>

#include "core/error.h"

namespace kiln {

const char* dtype_name(DType t) {
  constexpr const char* names[kNumDTypes] = {"float32", "float64", "float16", "bfloat16", "int64",
                                             "int32",   "int16",   "int8",    "uint8",    "bool"};
  return names[static_cast<int>(t)];
}

const char* scalar_type_name(DType t) {
  constexpr const char* names[kNumDTypes] = {"Float", "Double", "Half", "BFloat16", "Long",
                                             "Int",   "Short",  "Char", "Byte",     "Bool"};
  return names[static_cast<int>(t)];
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << "kiln." << dtype_name(t); }

namespace {

// Rank within a category; a wider type has a higher rank.
int float_rank(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16: return 0;
    case DType::Float32: return 1;
    default: return 2;  // Float64
  }
}

int signed_int_rank(DType t) {
  switch (t) {
    case DType::Int8: return 0;
    case DType::Int16: return 1;
    case DType::Int32: return 2;
    default: return 3;  // Int64
  }
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    // Half and BFloat16 have different exponent/mantissa splits: neither holds the
    // other, so PyTorch promotes the pair to Float32.
    if (is_reduced_floating_point(a) && is_reduced_floating_point(b)) return DType::Float32;
    return float_rank(a) >= float_rank(b) ? a : b;
  }
  // Both integral. UInt8 with a signed type needs a signed type wide enough for 0..255.
  if (a == DType::UInt8 || b == DType::UInt8) {
    const DType s = a == DType::UInt8 ? b : a;
    return s == DType::Int8 ? DType::Int16 : s;
  }
  return signed_int_rank(a) >= signed_int_rank(b) ? a : b;
}

namespace {
std::atomic<DType> g_default_dtype{DType::Float32};
}

DType default_dtype() { return g_default_dtype.load(std::memory_order_relaxed); }

void set_default_dtype(DType t) {
  KILN_CHECK_TYPE(t == DType::Float32 || t == DType::Float64,
                  "only floating-point types are supported as the default type");
  g_default_dtype.store(t, std::memory_order_relaxed);
}

}  // namespace kiln
