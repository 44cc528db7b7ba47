// compile/passes/eliminate_common_subexpressions.cpp — a call that repeats an earlier call on
// the same values leaves the graph, and its readers read the earlier result. See Note [The
// same value made twice].
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "compile/passes.h"
#include "compile/storage_uses.h"

namespace kiln::compiler {

// Note [The same value made twice]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Modules written for any input repeat work when they meet a special one: self-attention is
// multi-head attention whose query, key and value are the same tensor, so nn::MultiheadAttention
// copies the same transposed view into three buffers, one per projection (charlm's graph shows
// three `copy(%17.view[64, 16, 128]/strides[128, 8192, 1])` a layer). A captured step can see
// that the three copies are one value: the pass keeps the first and points the readers of the
// others at it (common-subexpression elimination, as torch.fx's and every compiler's CSE does).
// A later call repeats an earlier one when
//  - both run the same kernel (family and op) with the same attributes, and both compute from
//    their inputs alone (fill, arange, copy, the elementwise families, where, cat, reduce);
//  - every tensor they read is the same: one storage, sizes, strides, offset and dtype, and no
//    call writes that storage between the two;
//  - each writes whole storages, written by nothing else, not pinned and not held from outside
//    the graph (so the earlier result keeps its value for as long as the later one's readers
//    need it, and nothing outside the graph expects the later one's memory).
// The later result's readers get the earlier storage with their own view's geometry. Kernels
// compute the same bits from the same inputs on the same thread count, so the pass is exact;
// it runs first, so that the fusions see one value where there were several.

namespace {

/// A tensor's place and shape: two reads are of one value when these are equal.
using View = std::tuple<const Storage*, std::vector<std::int64_t>, std::vector<std::int64_t>, std::int64_t, DType>;

View view_of(const Tensor& t) {
  const TensorImpl& i = *t.impl();
  return {i.storage().get(), {i.sizes().begin(), i.sizes().end()}, {i.strides().begin(), i.strides().end()},
          i.storage_offset(), i.dtype()};
}

/// What makes two calls the same computation: the kernel, its attributes and what it reads.
struct Signature {
  int family = 0, op = 0;
  std::string attributes;
  std::vector<View> reads;
  std::vector<std::pair<std::vector<std::int64_t>, DType>> writes;  // the results' shapes
  auto operator<=>(const Signature&) const = default;
};

}  // namespace

void eliminate_common_subexpressions(Graph& g) {
  const std::map<const Storage*, StorageUses> uses = storage_uses(g);
  const std::set<const Storage*> outside = held_outside(g);
  auto result_is_private = [&](const Tensor& t) {
    const Storage* s = storage_of(t);
    const StorageUses& u = uses.at(s);
    return covers_storage(t) && !u.pinned && outside.count(s) == 0 && u.writes.size() == 1;
  };
  std::map<Signature, std::size_t> first_made;  // signature -> the node that made it first
  std::map<const Storage*, Tensor> earlier_result;  // a repeated result's storage -> the first result
  std::vector<bool> removed(g.nodes.size(), false);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.kind != Node::Kind::Kernel || !computes_from_inputs_alone(node.call->id().family)) continue;
    const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();
    const std::vector<bool> writes = node.call->writes(), updates = node.call->updates();
    Signature sig{static_cast<int>(node.call->id().family), node.call->id().op, node.call->attributes(), {}, {}};
    std::vector<const Tensor*> results;
    bool eligible = true;
    for (std::size_t i = 0; i < args.size() && eligible; ++i) {
      if (!args[i]->defined()) continue;
      if (writes[i]) {
        eligible = !updates[i] && result_is_private(*args[i]);
        results.push_back(args[i]);
        sig.writes.emplace_back(std::vector<std::int64_t>(args[i]->sizes().begin(), args[i]->sizes().end()),
                                args[i]->dtype());
      } else {
        // A read of a result already found to repeat an earlier one reads the earlier one.
        View v = view_of(*args[i]);
        if (const auto it = earlier_result.find(std::get<0>(v)); it != earlier_result.end()) {
          std::get<0>(v) = storage_of(it->second);
        }
        sig.reads.push_back(std::move(v));
      }
    }
    if (!eligible || results.empty()) continue;
    const auto [it, fresh] = first_made.emplace(sig, n);
    if (fresh) continue;
    // The same computation again: the first result must still hold its value here, which it
    // does when nothing wrote what either call reads in between (results are written once).
    const std::size_t first = it->second;
    bool inputs_unchanged = true;
    for (const View& v : sig.reads) {
      inputs_unchanged = inputs_unchanged && !written_between(uses.at(std::get<0>(v)), first, n);
    }
    if (!inputs_unchanged) {
      it->second = n;  // later repeats compare against this one
      continue;
    }
    const std::vector<const Tensor*> earlier = std::as_const(*g.nodes[first].call).tensors();
    const std::vector<bool> earlier_writes = g.nodes[first].call->writes();
    std::size_t k = 0;
    for (std::size_t i = 0; i < earlier.size(); ++i) {
      if (earlier[i]->defined() && earlier_writes[i]) earlier_result[storage_of(*results[k++])] = *earlier[i];
    }
    removed[n] = true;
  }
  if (earlier_result.empty()) return;
  for_each_handle(g, [&](Tensor& t) {
    if (!t.defined()) return;
    const auto it = earlier_result.find(storage_of(t));
    if (it != earlier_result.end()) t = with_geometry(it->second, t);
  });
  remove_nodes(g, removed);
}

}  // namespace kiln::compiler
