// core/state_dict.cpp — StateDict's ordered insert, lookup and removal.
#include "core/state_dict.h"

#include "core/error.h"

namespace kiln {

StateDict::StateDict(std::initializer_list<Entry> entries) {
  for (const Entry& e : entries) insert(e.first, e.second);
}

void StateDict::insert(std::string name, Tensor t) {
  if (const auto it = index_.find(name); it != index_.end()) {
    entries_[it->second].second = std::move(t);
    return;
  }
  index_.emplace(name, entries_.size());
  entries_.emplace_back(std::move(name), std::move(t));
}

Tensor& StateDict::operator[](const std::string& name) {
  if (!contains(name)) insert(name, Tensor());
  return entries_[index_.at(name)].second;
}

const Tensor* StateDict::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Tensor& StateDict::at(const std::string& name) const {
  const Tensor* t = find(name);
  KILN_CHECK_INDEX(t != nullptr, "state_dict has no entry '", name, "'");
  return *t;
}

std::size_t StateDict::erase(const std::string& name) {
  const auto it = index_.find(name);
  if (it == index_.end()) return 0;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(it->second));
  reindex();
  return 1;
}

Tensor StateDict::pop(const std::string& name) {
  Tensor t = at(name);
  erase(name);
  return t;
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.first);
  return out;
}

std::vector<Tensor> StateDict::values() const {
  std::vector<Tensor> out;
  for (const auto& e : entries_) out.push_back(e.second);
  return out;
}

void StateDict::clear() {
  entries_.clear();
  index_.clear();
}

void StateDict::reindex() {
  index_.clear();
  for (std::size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
}

}  // namespace kiln
