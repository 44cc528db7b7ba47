// compile/passes/fusion.h — the walk every fusion pass makes: visit each kernel call of one
// family, let the pass decide whether it fuses with its neighbours, and take the nodes it
// merged out of the graph afterwards. See Note [How a fusion pass walks the graph].
//
//   fuse_each<ConvCall>(g, KernelFamily::ConvForward, [&](std::size_t n, ConvCall& call, std::vector<bool>& removed) {
//     ...                      // return to leave node n as it is
//     removed[m] = true;       // node m's work now happens in node n's fused call
//   });
//
// Read next: compile/passes/fuse_conv_relu.cpp (the smallest pass built on it).
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "compile/graph.h"
#include "compile/passes.h"
#include "compile/storage_uses.h"

namespace kiln::compiler {

// Note [How a fusion pass walks the graph]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each fusion pass starts at the node that runs one kernel family (a convolution, a pool's
// backward, a product) and looks along storage uses for the node it can merge with. Its own
// test is what differs from pass to pass; the walk around it does not: nodes are visited in
// the order they ran, a node already merged into an earlier fusion is not offered again, and
// merged nodes are only marked while the walk runs (node indices, and the StorageUses built
// from them, stay valid) and leave the graph in one remove_nodes at the end.

/// `node`'s call as a `Call` (const or not) when the node runs a kernel of `family` with that
/// signature, else null.
template <class Call>
Call* kernel_call(const Node& node, KernelFamily family) {
  if (node.kind != Node::Kind::Kernel || node.call->id().family != family) return nullptr;
  return dynamic_cast<Call*>(node.call.get());
}

/// The one node that reads a storage with these uses, when exactly one node writes it, exactly
/// one reads it and nothing pins it: the value a fusion may keep from ever being stored.
inline std::optional<std::size_t> only_reader(const StorageUses& uses) {
  if (uses.pinned || uses.writes.size() != 1 || uses.reads.size() != 1) return std::nullopt;
  return uses.reads.front();
}

/// The one node that writes a storage with these uses, when exactly one does and nothing pins it.
inline std::optional<std::size_t> only_writer(const StorageUses& uses) {
  if (uses.pinned || uses.writes.size() != 1) return std::nullopt;
  return uses.writes.front();
}

/// Offers each node that runs a kernel of `family` through a `Call`, in order and unless an
/// earlier fusion removed it, to `fuse(n, call, removed)`; then removes the nodes it marked.
template <class Call, class Fuse>
void fuse_each(Graph& g, KernelFamily family, Fuse&& fuse) {
  std::vector<bool> removed(g.nodes.size(), false);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    if (removed[n]) continue;
    if (Call* call = kernel_call<Call>(g.nodes[n], family)) fuse(n, *call, removed);
  }
  remove_nodes(g, removed);
}

}  // namespace kiln::compiler
