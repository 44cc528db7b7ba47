// compile/passes/fold_constants.cpp — the calls whose values depend on nothing a step changes
// (a causal mask, a scale factor filled and cast) leave the replay: the capture already made
// their values, which every replay then reads. See Note [Values computed once].
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "compile/passes.h"
#include "compile/storage_uses.h"

namespace kiln::compiler {

// Note [Values computed once]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Host code makes some values afresh at every step although they never change: the charlm
// Transformer builds its causal mask from arange, sub, lt and where (13 kernel calls), each
// attention scales its scores by a Float64 scalar filled and then cast to Float32, and
// clip_grad_norm_ fills its 1e-6 and 1. Eagerly that is the price of not knowing better; a
// captured step knows, because a value's whole history is in the graph. The pass keeps a
// value from the first run and drops the calls that made it (constant folding: torch.fx's
// const_fold, XLA's and TVM's passes of the same name).
// A call is folded when
//  - its kernel computes its outputs from its inputs alone: fill, arange, copy, the
//    elementwise families, where, cat and the reductions (never a random draw, an optimizer's
//    update or a pass's fused kernel);
//  - everything it reads is a folded value, and everything it writes is one.
// A storage is a folded value when every call that writes it is folded; its first use writes
// all of it, so it owes nothing to an earlier step; no call reads it before its last write,
// except the writers themselves (an in-place chain such as zeros then index_fill_); and
// nothing pins it (a region's read, a gradient bound to a leaf, the step's inputs and
// outputs) or holds it from outside the graph (a buffer the caller keeps may change between
// steps). The test repeats until no call or storage changes its answer.
// The folded values stay in the storages the capture computed them in, listed in
// Graph::constants, which keeps them alive, prints them as %constN and keeps plan_memory from
// placing them in the arena. Nothing is computed differently, so the pass is exact; it runs
// after the layer fusions, which never fuse into a constant's maker, and before
// fuse_elementwise_chains (whose chains read the folded values) and plan_memory.

void fold_constants(Graph& g) {
  const std::map<const Storage*, StorageUses> uses = storage_uses(g);
  const std::set<const Storage*> outside = held_outside(g);
  std::vector<bool> folded(g.nodes.size(), false);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    folded[n] = node.kind == Node::Kind::Kernel && computes_from_inputs_alone(node.call->id().family);
  }
  // Storages that may hold a value made once: the conditions that do not depend on `folded`.
  std::set<const Storage*> candidates;
  for (const auto& [s, u] : uses) {
    if (s == nullptr || u.pinned || outside.count(s) != 0 || u.writes.empty()) continue;
    const std::size_t last_write = u.writes.back();
    bool reads_after_writes = true;
    for (std::size_t r : u.reads) {
      const bool by_writer = std::find(u.writes.begin(), u.writes.end(), r) != u.writes.end();
      reads_after_writes = reads_after_writes && (by_writer || r > last_write);
    }
    if (reads_after_writes && u.first_use_writes_whole) candidates.insert(s);
  }
  for (bool changed = true; changed;) {
    changed = false;
    auto unfold = [&](std::size_t n) {
      if (folded[n]) {
        folded[n] = false;
        changed = true;
      }
    };
    for (const auto& [s, u] : uses) {
      bool all_writers_folded = true;
      for (std::size_t w : u.writes) all_writers_folded = all_writers_folded && folded[w];
      const bool constant = candidates.count(s) != 0 && all_writers_folded;
      if (constant) continue;
      // A call that reads or writes a value that changes must run at every replay.
      for (std::size_t w : u.writes) unfold(w);
      for (std::size_t r : u.reads) unfold(r);
    }
  }
  // The values a call that still runs reads, in the order they were made; one only folded
  // calls read goes with them.
  std::map<std::size_t, std::vector<Tensor>> made_at;
  for (const auto& [s, u] : uses) {
    if (u.writes.empty() || !folded[u.writes.front()]) continue;
    bool read_by_a_replayed_call = false;
    for (std::size_t r : u.reads) read_by_a_replayed_call = read_by_a_replayed_call || !folded[r];
    if (!read_by_a_replayed_call) continue;
    for (const Tensor* t : std::as_const(*g.nodes[u.writes.front()].call).tensors()) {
      if (storage_of(*t) == s && covers_storage(*t)) {
        made_at[u.writes.front()].push_back(*t);
        break;
      }
    }
  }
  for (auto& [n, values] : made_at) g.constants.insert(g.constants.end(), values.begin(), values.end());
  remove_nodes(g, folded);
}

}  // namespace kiln::compiler
