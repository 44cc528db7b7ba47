// compile/graph.cpp — replaying, counting and printing a captured graph (see compile/graph.h).
#include "compile/graph.h"

#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "compile/input_buffers.h"
#include "core/autograd_meta.h"
#include "core/grad_mode.h"
#include "core/ops/copy.h"
#include "core/profiler_hooks.h"

namespace kiln::compiler {

void Node::run() const {
  switch (kind) {
    case Kind::Kernel: call->run(); break;
    case Kind::Region: replay(); break;
    case Kind::BindGrad: leaf.mutable_grad() = grad; break;
  }
}

LentOutputs& Graph::lent() const {
  if (!lent_) lent_ = std::make_unique<LentOutputs>(*this, handed());
  return *lent_;
}

const std::vector<Tensor>& Graph::handed() const {
  if (handed_.empty()) {
    handed_ = outputs;
    for (const GradInput& in : grad_inputs) {
      Tensor bound;  // the last binding wins, as it does eagerly
      for (const Node& node : nodes) {
        if (node.kind == Node::Kind::BindGrad && node.leaf.is_same(inputs[in.input])) bound = node.grad;
      }
      handed_.push_back(bound);
    }
  }
  return handed_;
}

std::vector<Tensor> Graph::capture_results(const std::vector<Tensor>& results) const {
  std::vector<Tensor> handed = results;
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < handed.size(); ++i) {
    if (lent().lends(i)) handed[i] = ops::clone(results[i]);
  }
  return handed;
}

std::vector<Tensor> Graph::run(const std::vector<Tensor>& values) const {
  KILN_CHECK(values.size() == inputs.size(), "compiled step: expected ", inputs.size(), " inputs, got ",
             values.size());
  lent().settle();  // before anything overwrites the buffers
  hold_callers_grads(*this, values);
  {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!values[i].is_same(inputs[i])) ops::copy_(inputs[i], values[i]);
    }
  }
  if (!scratch_) scratch_ = std::make_unique<Scratch>();
  for (const Node& node : nodes) {
    // A profiled replay shows each kernel call as a span named after its kernel, where an
    // eager step shows its ops ("conv2d.forward_relu_max_pool": 3 calls, 2.1 ms).
    std::string name;
    std::optional<profiler::Span> span;
    if (node.kind == Node::Kind::Kernel && profiler::observer() != nullptr) [[unlikely]] {
      name = node.call->name();
      span.emplace(name.c_str(), profiler::SpanKind::Region);
    }
    if (node.kind != Node::Kind::Kernel || node.keeps_scratch) {
      node.run();
      continue;
    }
    // Kernels' own temporaries come from the scratch block (Note [Kernels' own memory in a
    // replay]); a region's code may keep what it allocates (an optimizer's state), so it does not.
    struct Uninstall {
      Scratch& s;
      bool done = false;
      ~Uninstall() {
        if (!done) s.release();
      }
    } guard{*scratch_};
    scratch_->install();
    node.run();
    guard.done = true;
    if (!scratch_->release()) node.keeps_scratch = true;
  }
  scratch_->fit();
  {
    NoGradGuard no_grad;
    for (std::size_t i : written_inputs) {
      if (!values[i].is_same(inputs[i])) ops::copy_(values[i], inputs[i]);
    }
  }
  std::vector<Tensor> results = lent().lend(handed());
  std::vector<Tensor> bound(results.begin() + static_cast<std::ptrdiff_t>(outputs.size()), results.end());
  results.resize(outputs.size());
  for (std::size_t k = 0; k < bound.size(); ++k) {
    // A gradient the step did not make anew (it is state of the graph's) is the caller's copy.
    if (bound[k].defined() && !lent().lends(outputs.size() + k)) bound[k] = ops::clone(bound[k]);
  }
  hand_grads_to_callers(*this, values, bound);
  return results;
}

std::size_t Graph::scratch_bytes() const { return scratch_ ? scratch_->capacity() : 0; }

std::size_t Graph::count(Node::Kind kind) const {
  std::size_t n = 0;
  for (const Node& node : nodes) n += node.kind == kind;
  return n;
}

std::size_t Graph::count(KernelFamily family) const {
  std::size_t n = 0;
  for (const Node& node : nodes) n += node.kind == Node::Kind::Kernel && node.call->id().family == family;
  return n;
}

namespace {

/// Names values by storage, in the order print() meets them.
class Names {
 public:
  explicit Names(const Graph& g) {
    for (std::size_t i = 0; i < g.inputs.size(); ++i) fixed(g.inputs[i], "%in" + std::to_string(i));
    for (std::size_t i = 0; i < g.outputs.size(); ++i) fixed(g.outputs[i], "%out" + std::to_string(i));
    for (std::size_t i = 0; i < g.constants.size(); ++i) fixed(g.constants[i], "%const" + std::to_string(i));
    // Parameters by their module names, whichever view of them a kernel meets first.
    for (const Node& node : g.nodes) {
      if (node.kind == Node::Kind::BindGrad) named(node.leaf);
      if (node.kind != Node::Kind::Kernel) continue;
      for (const Tensor* t : std::as_const(*node.call).tensors()) named(*t);
    }
  }
  void named(const Tensor& t) {
    if (!t.defined()) return;
    if (const AutogradMeta* meta = t.impl()->autograd_meta_if_exists(); meta && !meta->name.empty()) {
      fixed(t, meta->name);
    }
  }
  void fixed(const Tensor& t, const std::string& name) {
    if (t.defined()) names_.emplace(t.impl()->storage().get(), name);
  }
  /// The value's name, its leaf name when autograd named it, else a new %N.
  std::string of(const Tensor& t) {
    if (!t.defined()) return "None";
    const Storage* s = t.impl()->storage().get();
    auto it = names_.find(s);
    if (it == names_.end()) it = names_.emplace(s, std::string("%").append(std::to_string(next_++))).first;
    return it->second + (is_view(t) ? view_suffix(t) : "");
  }
  static std::string type_of(const Tensor& t) {
    std::ostringstream os;
    os << dtype_name(t.dtype()) << t.sizes();
    return os.str();
  }

 private:
  static bool is_view(const Tensor& t) {
    return t.impl()->storage_offset() != 0 || !t.is_contiguous() ||
           static_cast<std::size_t>(t.numel()) * t.element_size() != t.impl()->storage()->nbytes();
  }
  static std::string view_suffix(const Tensor& t) {
    std::ostringstream os;
    os << ".view" << t.sizes();
    if (!t.is_contiguous()) os << "/strides" << t.strides();
    if (t.impl()->storage_offset() != 0) os << "+" << t.impl()->storage_offset();
    return os.str();
  }
  std::map<const Storage*, std::string> names_;
  int next_ = 0;
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string Graph::print() const {
  Names names(*this);
  std::ostringstream os;
  os << "graph(";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? ", " : "") << names.of(inputs[i]) << ": " << Names::type_of(inputs[i]);
  }
  os << "):\n";
  for (const Tensor& c : constants) os << "  " << names.of(c) << ": " << Names::type_of(c) << " = constant\n";
  for (const Node& node : nodes) {
    os << "  ";
    switch (node.kind) {
      case Node::Kind::Kernel: {
        const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();
        const std::vector<bool> writes = node.call->writes();
        const std::vector<bool> updates = node.call->updates();
        std::string results, operands;
        for (std::size_t i = 0; i < args.size(); ++i) {
          if (writes[i]) {
            results += (results.empty() ? "" : ", ") + names.of(*args[i]) + ": " + Names::type_of(*args[i]);
          }
        }
        for (std::size_t i = 0; i < args.size(); ++i) {
          if (!writes[i] || updates[i]) operands += (operands.empty() ? "" : ", ") + names.of(*args[i]);
        }
        os << results << " = " << node.call->name() << "(" << operands << ")";
        if (const std::string a = node.call->attributes(); !a.empty()) os << " {" << a << "}";
        break;
      }
      case Node::Kind::Region:
        os << "region " << node.region << "()";
        for (std::size_t i = 0; i < node.reads.size(); ++i) os << (i ? ", " : " reads ") << names.of(node.reads[i]);
        break;
      case Node::Kind::BindGrad: os << names.of(node.leaf) << ".grad = " << names.of(node.grad); break;
    }
    if (!node.made_by.empty()) os << "  # " << node.made_by;
    os << "\n";
  }
  os << "  return ";
  for (std::size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << names.of(outputs[i]);
  os << "\n";
  if (memory.arena) {
    os << "  # arena: " << memory.temporaries << " temporaries, " << memory.temporary_bytes << " bytes in "
       << memory.bytes << "\n";
  }
  return os.str();
}

std::string Graph::to_dot() const {
  Names names(*this);
  std::ostringstream os;
  os << "digraph step {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  // The last node that wrote each value, so an edge runs from writer to reader.
  std::map<const Storage*, std::size_t> writer;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    os << "  in" << i << " [shape=ellipse, label=\"" << escape(names.of(inputs[i]) + "\\n" + Names::type_of(inputs[i]))
       << "\"];\n";
  }
  for (std::size_t i = 0; i < constants.size(); ++i) {
    os << "  const" << i << " [shape=ellipse, style=dashed, label=\""
       << escape(names.of(constants[i]) + "\\n" + Names::type_of(constants[i])) << "\"];\n";
  }
  auto source = [&](const Tensor& t) -> std::string {
    const Storage* s = t.impl()->storage().get();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].impl()->storage().get() == s) return "in" + std::to_string(i);
    }
    for (std::size_t i = 0; i < constants.size(); ++i) {
      if (constants[i].impl()->storage().get() == s) return "const" + std::to_string(i);
    }
    const auto it = writer.find(s);
    return it == writer.end() ? std::string() : "n" + std::to_string(it->second);
  };
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    std::vector<Tensor> read, written;
    std::string label, shape = "box";
    switch (node.kind) {
      case Node::Kind::Kernel: {
        const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();
        const std::vector<bool> writes = node.call->writes();
        const std::vector<bool> updates = node.call->updates();
        for (std::size_t i = 0; i < args.size(); ++i) {
          if (!args[i]->defined()) continue;
          if (!writes[i] || updates[i]) read.push_back(*args[i]);
          if (writes[i]) written.push_back(*args[i]);
        }
        label = node.call->name();
        if (!written.empty()) label += "\\n" + Names::type_of(written.front());
        break;
      }
      case Node::Kind::Region:
        label = node.region;
        shape = "octagon";
        read = node.reads;
        break;
      case Node::Kind::BindGrad:
        label = names.of(node.leaf) + ".grad";
        shape = "note";
        read = {node.grad};
        break;
    }
    os << "  n" << n << " [shape=" << shape << ", label=\"" << escape(label) << "\"];\n";
    for (const Tensor& t : read) {
      if (const std::string from = source(t); !from.empty()) os << "  " << from << " -> n" << n << ";\n";
    }
    for (const Tensor& t : written) writer[t.impl()->storage().get()] = n;
  }
  os << "}\n";
  return os.str();
}

}  // namespace kiln::compiler
