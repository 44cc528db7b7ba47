// core/scalar.cpp — Scalar helpers.
#include "core/scalar.h"

namespace kiln {

DType Scalar::natural_dtype() const {
  switch (kind_) {
    case Kind::Floating: return default_dtype();
    case Kind::Integral: return DType::Int64;
    case Kind::Bool: return DType::Bool;
  }
  return DType::Int64;
}

Scalar Scalar::operator-() const {
  if (kind_ == Kind::Floating) return Scalar(-d_);
  return Scalar(-i_);
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Floating: return os << s.to_double();
    case Scalar::Kind::Integral: return os << s.to_int();
    case Scalar::Kind::Bool: return os << (s.to_int() ? "True" : "False");
  }
  return os;
}

}  // namespace kiln
