// compile/outside_reads.cpp — noting the tensors a graph shares with the world outside it, and
// seeing one let go (Note [Tensors a step reads from outside]).
#include "compile/outside_reads.h"

#include <set>
#include <sstream>

namespace kiln::compiler {

OutsideReads::OutsideReads(const Graph& g) {
  std::set<const Storage*> own;  // refilled or rebound by the replay itself
  for (const Tensor& t : g.inputs) own.insert(storage_of(t));
  for (const Graph::GradInput& in : g.grad_inputs) own.insert(storage_of(in.held));
  for (const Node& node : g.nodes) {
    if (node.kind == Node::Kind::BindGrad) own.insert(storage_of(node.grad));
  }
  for (auto& [s, h] : graph_holds(g)) {
    if (!own.contains(s) && h.held_outside()) held_.push_back(std::move(h));
  }
}

std::string OutsideReads::let_go() const {
  for (const GraphHolds& h : held_) {
    if (h.held_outside()) continue;
    const std::shared_ptr<TensorImpl> impl = h.impls.front().first.lock();
    std::ostringstream os;
    os << dtype_name(impl->dtype()) << IntArrayRef(impl->sizes());
    return os.str();
  }
  return "";
}

}  // namespace kiln::compiler
