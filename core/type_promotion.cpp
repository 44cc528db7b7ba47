// core/type_promotion.cpp — result_type and can_cast. See Note [Type promotion].
#include "core/type_promotion.h"

#include <optional>

namespace kiln {

namespace {

int category(DType t) {
  if (t == DType::Bool) return 0;
  return is_floating_point(t) ? 2 : 1;
}

std::optional<DType> promote(std::optional<DType> a, DType b) {
  return a ? promote_types(*a, b) : b;
}

/// PyTorch's combine_categories: `lower` only counts when it is of a higher category.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (category(*lower) > category(*higher)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(std::initializer_list<const Tensor*> operands) {
  std::optional<DType> dimensioned, zero_dim, wrapped;
  for (const Tensor* t : operands) {
    if (t == nullptr || !t->defined()) continue;
    if (t->provenance().origin == TensorOrigin::WrappedNumber) {
      // A C++ floating number counts as the default dtype, an integer as Int64.
      DType d = t->dtype();
      if (is_floating_point(d)) d = default_dtype();
      wrapped = promote(wrapped, d);
    } else if (t->dim() == 0) {
      zero_dim = promote(zero_dim, t->dtype());
    } else {
      dimensioned = promote(dimensioned, t->dtype());
    }
  }
  const auto result = combine(dimensioned, combine(zero_dim, wrapped));
  return result.value_or(default_dtype());
}

bool can_cast(DType from, DType to) {
  return category(from) <= category(to);
}

}  // namespace kiln
