// compile/outside_reads.cpp — noting the tensors a graph shares with the world outside it, and
// seeing one let go (Note [Tensors a step reads from outside]).
#include "compile/outside_reads.h"

#include <set>
#include <sstream>

namespace kiln::compiler {

namespace {

/// "float32[2, 5]"
std::string type_of(const TensorImpl& t) {
  std::ostringstream os;
  os << dtype_name(t.dtype()) << IntArrayRef(t.sizes());
  return os.str();
}

}  // namespace

OutsideReads::OutsideReads(const Graph& g, const std::vector<std::weak_ptr<Storage>>& made) {
  std::set<const Storage*> made_alive;
  for (const std::weak_ptr<Storage>& m : made) {
    if (const std::shared_ptr<Storage> s = m.lock()) made_alive.insert(s.get());
  }
  for (const Tensor& t : g.outputs) made_alive.erase(storage_of(t));  // the caller's results
  std::set<const Storage*> own = refilled_buffers(g);  // refilled or rebound by the replay itself
  for (const Node& node : g.nodes) {
    if (node.kind == Node::Kind::BindGrad) own.insert(storage_of(node.grad));
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
        const std::string how = t.describe();
        made_and_kept_ = type_of(*impl) + (how.empty() ? "" : ", " + how);
      }
    }
    storages_.insert(s);
    held_.push_back(std::move(h));
  }
}

std::string OutsideReads::let_go() const {
  for (const GraphHolds& h : held_) {
    if (h.held_outside()) continue;
    return type_of(*h.impls.front().first.lock());
  }
  return "";
}

}  // namespace kiln::compiler
