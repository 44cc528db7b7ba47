// compile/outside_reads.cpp — noting the tensors a graph shares with the world outside it, and
// seeing one let go (Note [Tensors a step reads from outside]).
#include "compile/outside_reads.h"

#include <set>
#include <sstream>

namespace kiln::compiler {

OutsideReads::OutsideReads(const Graph& g, const std::vector<std::weak_ptr<Storage>>& made) {
  std::set<const Storage*> own;  // refilled or rebound by the replay itself
  for (const Tensor& t : g.inputs) own.insert(storage_of(t));
  for (const Graph::GradInput& in : g.grad_inputs) own.insert(storage_of(in.held));
  for (const Node& node : g.nodes) {
    if (node.kind == Node::Kind::BindGrad) own.insert(storage_of(node.grad));
  }
  std::set<const Storage*> made_alive;
  for (const std::weak_ptr<Storage>& m : made) {
    if (const std::shared_ptr<Storage> s = m.lock()) made_alive.insert(s.get());
  }
  for (const Tensor& t : g.outputs) made_alive.erase(storage_of(t));  // the caller's results
  for (const Node& node : g.nodes) {
    // A region's replay code holds what it reads (an index check, its targets) beyond the
    // graph's own handles.
    if (node.kind != Node::Kind::Region) continue;
    for (const Tensor& t : node.reads) made_alive.erase(storage_of(t));
  }
  for (auto& [s, h] : graph_holds(g)) {
    if (own.contains(s) || !h.held_outside()) continue;
    if (made_alive.contains(s) && made_and_kept_.empty()) {
      if (const std::shared_ptr<TensorImpl> impl = h.impls.front().first.lock()) {
        const Tensor t(impl);
        std::ostringstream os;
        os << dtype_name(t.dtype()) << IntArrayRef(t.sizes());
        if (const std::string how = t.describe(); !how.empty()) os << ", " << how;
        made_and_kept_ = os.str();
      }
    }
    held_.push_back(std::move(h));
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
