// nn/containers.h — Sequential (runs its children in order), ModuleList (an indexed list of
// modules whose parameters are registered) and ModuleDict (the same, by name). Children are
// named "0", "1", ... in Sequential and ModuleList, as in PyTorch ("features.0.weight").
// Read next: nn/loss.h.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace kiln::nn {

class Sequential : public Module {
 public:
  Sequential() : Module("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  void push_back(const std::string& name, std::shared_ptr<Module> module);
  Tensor forward(const Tensor& input) override;
  std::shared_ptr<Module> operator[](std::size_t i) const;
  std::size_t size() const { return named_children().size(); }
};

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  std::shared_ptr<Module> operator[](std::size_t i) const;
  std::size_t size() const { return named_children().size(); }
};

class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  void insert(const std::string& name, std::shared_ptr<Module> module);
  std::shared_ptr<Module> operator[](const std::string& name) const;
  bool contains(const std::string& name) const;
  std::vector<std::string> keys() const;
  std::size_t size() const { return named_children().size(); }
};

}  // namespace kiln::nn
