// autograd/graph.cpp — DOT export and explanations (see autograd/graph.h).
#include "autograd/graph.h"

#include <sstream>
#include <unordered_map>
#include <vector>

#include "autograd/accumulate_grad.h"
#include "autograd/saved_variable.h"
#include "core/autograd_meta.h"

namespace kiln::autograd {

namespace {

std::string shape_text(const Tensor& t) {
  std::ostringstream os;
  os << t.sizes() << " " << dtype_name(t.dtype());
  return os.str();
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string to_dot(const TensorList& roots) {
  std::ostringstream os;
  os << "digraph backward {\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
     << "  rankdir=BT;\n";
  std::unordered_map<const Node*, int> ids;
  std::vector<std::shared_ptr<Node>> stack;
  auto id_of = [&](const std::shared_ptr<Node>& n) {
    auto [it, fresh] = ids.emplace(n.get(), static_cast<int>(ids.size()));
    if (fresh) stack.push_back(n);
    return it->second;
  };
  for (std::size_t r = 0; r < roots.size(); ++r) {
    const Tensor& t = roots[r];
    os << "  root" << r << " [label=\"output " << r << "\\n" << escape(shape_text(t))
       << "\", style=filled, fillcolor=\"#a8d5a2\"];\n";
    if (t.grad_fn()) os << "  root" << r << " -> n" << id_of(t.grad_fn()) << ";\n";
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> n = stack.back();
    stack.pop_back();
    const int id = ids.at(n.get());
    std::string label = n->name();
    std::string style;
    if (const auto* acc = dynamic_cast<const AccumulateGrad*>(n.get())) {
      const Tensor& leaf = acc->variable();
      const AutogradMeta* meta = leaf.impl()->autograd_meta_if_exists();
      const std::string name = meta && !meta->name.empty() ? meta->name : "leaf";
      label = escape(name) + "\\n" + escape(shape_text(leaf));
      style = ", style=filled, fillcolor=\"#add8e6\"";
    } else {
      for (const std::string& s : n->saved_summary()) label += "\\nsaved: " + escape(s);
    }
    os << "  n" << id << " [label=\"" << label << "\"" << style << "];\n";
    for (const Edge& e : n->next_edges()) {
      if (e.is_valid()) os << "  n" << id << " -> n" << id_of(e.function) << ";\n";
    }
  }
  os << "}\n";
  return os.str();
}

std::string explain(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor (default-constructed): it holds no data";
  std::ostringstream os;
  const Provenance& p = t.provenance();
  if (t.requires_grad()) {
    if (t.is_leaf()) {
      os << "a leaf that requires grad (" << t.describe()
         << "): backward() accumulates its gradient into .grad()";
    } else {
      os << "the output of " << p.api << ", recorded as " << t.grad_fn()->name()
         << ": it requires grad because an input did. It is not a leaf, so backward() does not "
            "keep its gradient in .grad(); call retain_grad() on it before backward() if you "
            "need it";
      if (t.retains_grad()) os << " (retain_grad() was called)";
    }
    return os.str();
  }
  if (!t.is_floating_point()) {
    os << "an integer/bool tensor (" << t.dtype() << "): such tensors never require grad";
    return os.str();
  }
  switch (p.origin) {
    case TensorOrigin::Created:
      os << t.describe() << " without requires_grad: create it with requires_grad(true) (or "
         << "call as_leaf(true) on it) if you need its gradient";
      break;
    case TensorOrigin::Detached:
      os << "the result of " << p.api << ": it shares memory with the original tensor but has "
         << "no history, so no gradient flows through it";
      break;
    case TensorOrigin::OpOutput:
    case TensorOrigin::View:
      if (t.impl()->made_without_grad()) {
        os << "the output of " << p.api << ", computed while grad mode was off (NoGradGuard) "
           << "although an input required grad: nothing was recorded";
      } else {
        os << "the output of " << p.api << ", computed from inputs that do not require grad: "
           << "there was nothing to record";
      }
      break;
    case TensorOrigin::WrappedNumber:
      os << "a C++ number wrapped into a tensor: constants have no gradient";
      break;
  }
  return os.str();
}

}  // namespace kiln::autograd
