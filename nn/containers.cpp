// nn/containers.cpp — Sequential, ModuleList, ModuleDict.
#include "nn/containers.h"

namespace kiln::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Module("Sequential") {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) { push_back(std::to_string(size()), std::move(module)); }

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> module) {
  register_module(name, std::move(module));
}

Tensor Sequential::forward(const Tensor& input) {
  Tensor x = input;
  for (const auto& [name, child] : named_children()) x = (*child)(x);  // Note [Module calls]
  return x;
}

std::shared_ptr<Module> Sequential::operator[](std::size_t i) const {
  KILN_CHECK_INDEX(i < size(), "index ", i, " is out of range for a Sequential of ", size(), " modules");
  return named_children()[i].second;
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : Module("ModuleList") {
  for (const auto& m : modules) push_back(m);
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

std::shared_ptr<Module> ModuleList::operator[](std::size_t i) const {
  KILN_CHECK_INDEX(i < size(), "index ", i, " is out of range for a ModuleList of ", size(), " modules");
  return named_children()[i].second;
}

void ModuleDict::insert(const std::string& name, std::shared_ptr<Module> module) {
  register_module(name, std::move(module));
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& name) const {
  for (const auto& [n, m] : named_children()) {
    if (n == name) return m;
  }
  KILN_CHECK_INDEX(false, "ModuleDict has no module named '", name, "'");
  return nullptr;
}

bool ModuleDict::contains(const std::string& name) const {
  for (const auto& c : named_children()) {
    if (c.first == name) return true;
  }
  return false;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& c : named_children()) out.push_back(c.first);
  return out;
}

}  // namespace kiln::nn
