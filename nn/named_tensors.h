// nn/named_tensors.h — what named_parameters() and named_buffers() return: the (name, tensor)
// pairs in registration order, as before, that can also be looked up by name as LibTorch's
// OrderedDict and Python's `dict(m.named_parameters())` can:
//
//   auto params = lstm.named_parameters();
//   kiln::Tensor w = params["weight_ih_l0"];               // a missing name is an IndexError
//   for (const auto& [name, p] : params) ...               // in registration order
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln::nn {

class NamedTensors : public std::vector<std::pair<std::string, Tensor>> {
 public:
  using vector::vector;
  using vector::operator[];
  /// The tensor named `name` (a handle sharing its storage, as the module's own); a missing
  /// name is an IndexError naming it (Python raises KeyError).
  const Tensor& operator[](const std::string& name) const;
  const Tensor& operator[](const char* name) const { return (*this)[std::string(name)]; }
  /// nullptr when no entry has that name.
  const Tensor* find(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  std::vector<std::string> keys() const;
};

}  // namespace kiln::nn
