// nn/named_tensors.cpp — looking up named_parameters() and named_buffers() by name.
#include "nn/named_tensors.h"

#include <algorithm>

#include "core/error.h"

namespace kiln::nn {

const Tensor* NamedTensors::find(const std::string& name) const {
  const auto it = std::ranges::find(*this, name, &value_type::first);
  return it == end() ? nullptr : &it->second;
}

const Tensor& NamedTensors::operator[](const std::string& name) const {
  const Tensor* t = find(name);
  KILN_CHECK_INDEX(t != nullptr, "no parameter or buffer named '", name, "'");
  return *t;
}

std::vector<std::string> NamedTensors::keys() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : *this) names.push_back(name);
  return names;
}

}  // namespace kiln::nn
