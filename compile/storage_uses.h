// compile/storage_uses.h — where each storage of a graph is read and written, node by node:
// what a pass asks before it moves or merges a kernel call ("is this value read anywhere
// else?", "is anything written here in between?"). A region's reads, a gradient bound to a
// leaf and the step's inputs and outputs count as uses that no pass may remove.
// Read next: compile/passes/fuse_conv_relu.cpp (a pass that asks).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "compile/graph.h"

namespace kiln::compiler {

struct StorageUses {
  std::vector<std::size_t> reads, writes;  // node indices, in order (a kernel that updates reads and writes)
  bool pinned = false;                     // read by a region, bound to a leaf, or an input or output
  /// Its first use writes the whole of it without reading it: the value it then holds needs
  /// nothing from before the step (a buffer a kernel fills, not one host code made).
  bool first_use_writes_whole = false;
};

std::map<const Storage*, StorageUses> storage_uses(const Graph& g);

/// Calls f(tensor) for every Tensor handle the graph holds: kernel arguments, regions' reads,
/// leaves and their bound gradients, inputs, outputs and constants (`G` is Graph or const Graph).
template <class G, class F>
void for_each_handle(G& g, F&& f) {
  for (auto& node : g.nodes) {
    switch (node.kind) {
      case Node::Kind::Kernel:
        if constexpr (std::is_const_v<G>) {
          for (const Tensor* t : std::as_const(*node.call).tensors()) f(*t);
        } else {
          for (Tensor* t : node.call->tensors()) f(*t);
        }
        break;
      case Node::Kind::Region:
        for (auto& t : node.reads) f(t);
        break;
      case Node::Kind::BindGrad:
        f(node.leaf);
        f(node.grad);
        break;
    }
  }
  for (auto& t : g.inputs) f(t);
  for (auto& in : g.grad_inputs) {
    if (in.held.defined()) f(in.held);
  }
  for (auto& t : g.outputs) f(t);
  for (auto& t : g.constants) f(t);
}

/// The graph's own tensors over one storage, held weakly (so that noting them changes no
/// count), with how many of the graph's handles share each.
struct GraphHolds {
  std::weak_ptr<Storage> storage;
  std::vector<std::pair<std::weak_ptr<TensorImpl>, long>> impls;
  /// Whether something outside the graph holds the storage: more references to it, or to one
  /// of the graph's tensors over it, than the graph's own handles account for.
  bool held_outside() const;
};

/// What the graph's handles hold, storage by storage.
std::map<const Storage*, GraphHolds> graph_holds(const Graph& g);

/// The storages every replay refills before it runs: the input buffers, and the graph's copies
/// of the callers' gradients (Note [A step's inputs] in compile/input_buffers.h).
std::set<const Storage*> refilled_buffers(const Graph& g);

/// The storages something outside the graph still holds once the capture ended (a parameter,
/// optimizer state, a tensor the caller kept).
std::set<const Storage*> held_outside(const Graph& g);

/// The storage under `t`.
inline const Storage* storage_of(const Tensor& t) { return t.defined() ? t.impl()->storage().get() : nullptr; }

/// Whether `t` covers the whole of its storage, contiguously from its start.
bool covers_storage(const Tensor& t);

/// Whether `t` is all of `like`'s storage with `like`'s sizes: the same whole value.
bool is_whole_value(const Tensor& t, const Tensor& like);

/// Whether `a` and `b` are the same view: storage, sizes, strides, offset and dtype.
bool same_view(const Tensor& a, const Tensor& b);

/// How many of `call`'s tensor arguments lie on storage `s`.
std::size_t handles_on(const KernelCall& call, const Storage* s);

/// A value a pass replaces: every argument over `old`'s storage in `nodes` becomes
/// `replacement`. Passes collect these while they walk and apply them after, so that no
/// storage dies while their StorageUses still name it.
struct StorageSwap {
  Tensor old, replacement;
  std::vector<std::size_t> nodes;
};
void apply_swaps(Graph& g, const std::vector<StorageSwap>& swaps);

/// A tensor over `over`'s storage with `like`'s sizes, strides, offset and dtype.
Tensor with_geometry(const Tensor& over, const Tensor& like);
/// The same over `storage`, its origin `provenance`.
Tensor with_geometry(std::shared_ptr<Storage> storage, const Tensor& like, Provenance provenance);

/// `a`, a view of contiguous `y`'s elements, as a view of the same elements of `x` (y's sizes,
/// any strides): the element a reaches at each index is x's at the place y's takes in y. A dim
/// of `a` that walks across a dim of y's (heads of [L, N·H, D] over [L, N, E]) becomes two or
/// more dims, outer first. Nothing when `a` leaves y or does not step through it evenly.
std::optional<Tensor> compose_view(const Tensor& a, const Tensor& y, const Tensor& x);

/// Whether any node strictly between `first` and `last` reads or writes storage `s`.
bool touched_between(const StorageUses& uses, std::size_t first, std::size_t last);
/// Whether any node strictly between `first` and `last` writes storage `s`.
bool written_between(const StorageUses& uses, std::size_t first, std::size_t last);

}  // namespace kiln::compiler
