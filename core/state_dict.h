// core/state_dict.h — StateDict: named tensors in insertion order, what modules, optimizers,
// the DataLoader, the GradScaler and checkpoints save and load (PyTorch's OrderedDict of
// tensors). It is core's because every one of those layers speaks it; none of them owns it.
// Read next: nn/module.h (state_dict() and load_state_dict()), nn/serialize.h (files).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln {

/// Named tensors in registration order: PyTorch's OrderedDict state_dict, with its habits.
///   StateDict sd = kiln::load("model.safetensors");
///   sd["head.weight"] = sd.pop("fc.weight");         // rename a key
///   sd.erase("fc.bias");                              // drop a classifier head
///   for (const auto& [name, t] : sd.items()) ...      // insertion order
class StateDict {
 public:
  using Entry = std::pair<std::string, Tensor>;
  StateDict() = default;
  StateDict(std::initializer_list<Entry> entries);

  /// Adds `name` at the end, or replaces its tensor where it already is.
  void insert(std::string name, Tensor t);
  /// The tensor named `name`, inserted (undefined, at the end) when absent, as std::map does.
  Tensor& operator[](const std::string& name);
  /// The tensor named `name`; a missing key is an IndexError naming it.
  const Tensor& at(const std::string& name) const;
  const Tensor& operator[](const std::string& name) const { return at(name); }
  /// The tensor named `name`, or nullptr.
  const Tensor* find(const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  /// Removes `name`; returns how many entries went (0 or 1).
  std::size_t erase(const std::string& name);
  /// Removes `name` and returns its tensor (Python's dict.pop); a missing key is an error.
  Tensor pop(const std::string& name);
  std::vector<std::string> keys() const;
  std::vector<Tensor> values() const;
  const std::vector<Entry>& items() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void clear();
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  void reindex();
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::size_t> index_;  // name -> position in entries_
};

}  // namespace kiln
