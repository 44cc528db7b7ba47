// compile/outside_reads.cpp — noting the tensors a graph shares with the world outside it, and
// seeing one let go (Note [Tensors a step reads from outside]).
#include "compile/outside_reads.h"

#include <map>
#include <set>
#include <sstream>

#include "compile/storage_uses.h"

namespace kiln::compiler {

namespace {

/// Whether something outside the graph holds `h`'s storage: more references to it, or to one
/// of the graph's tensors over it, than the graph's own handles account for.
template <class Held>
bool held_outside_graph(const Held& h) {
  if (h.storage.use_count() != static_cast<long>(h.impls.size())) return true;
  for (const auto& [impl, handles] : h.impls) {
    if (impl.use_count() != handles) return true;
  }
  return false;
}

}  // namespace

OutsideReads::OutsideReads(const Graph& g) {
  std::set<const Storage*> own;  // refilled or rebound by the replay itself
  for (const Tensor& t : g.inputs) own.insert(storage_of(t));
  for (const Node& node : g.nodes) {
    if (node.kind == Node::Kind::BindGrad) own.insert(storage_of(node.grad));
  }
  std::map<const Storage*, std::map<const TensorImpl*, long>> handles;
  std::map<const Storage*, Held> by_storage;
  for_each_handle(g, [&](const Tensor& t) {
    if (!t.defined() || own.contains(storage_of(t))) return;
    Held& h = by_storage[storage_of(t)];
    if (h.storage.expired()) h.storage = t.impl()->storage();
    if (++handles[storage_of(t)][t.impl()] == 1) h.impls.emplace_back(t.impl_ptr(), 0);
  });
  for (auto& [s, h] : by_storage) {
    for (auto& [impl, count] : h.impls) count = handles[s][impl.lock().get()];
    if (held_outside_graph(h)) held_.push_back(std::move(h));
  }
}

std::string OutsideReads::let_go() const {
  for (const Held& h : held_) {
    if (held_outside_graph(h)) continue;
    const std::shared_ptr<TensorImpl> impl = h.impls.front().first.lock();
    std::ostringstream os;
    os << dtype_name(impl->dtype()) << IntArrayRef(impl->sizes());
    return os.str();
  }
  return "";
}

}  // namespace kiln::compiler
