// compile/storage_uses.cpp — reads and writes of each storage in a graph (see
// compile/storage_uses.h).
#include "compile/storage_uses.h"

#include <optional>
#include <utility>
#include <vector>

#include "core/ops/allocate.h"

namespace kiln::compiler {

namespace {

/// Whether one of the kernel `node`'s arguments over storage `s` covers all of it.
bool writes_covering(const Node& node, const Storage* s) {
  for (const Tensor* t : std::as_const(*node.call).tensors()) {
    if (storage_of(*t) == s && covers_storage(*t)) return true;
  }
  return false;
}

}  // namespace

std::map<const Storage*, StorageUses> storage_uses(const Graph& g) {
  std::map<const Storage*, StorageUses> uses;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    switch (node.kind) {
      case Node::Kind::Kernel: {
        const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();
        const std::vector<bool> writes = node.call->writes(), updates = node.call->updates();
        for (std::size_t i = 0; i < args.size(); ++i) {
          const Storage* s = storage_of(*args[i]);
          if (s == nullptr) continue;
          StorageUses& u = uses[s];
          if (!writes[i] || updates[i]) {
            if (u.reads.empty() || u.reads.back() != n) u.reads.push_back(n);
          }
          if (writes[i] && (u.writes.empty() || u.writes.back() != n)) u.writes.push_back(n);
        }
        break;
      }
      case Node::Kind::Region:
        for (const Tensor& t : node.reads) {
          if (const Storage* s = storage_of(t)) {
            uses[s].reads.push_back(n);
            uses[s].pinned = true;
          }
        }
        break;
      case Node::Kind::BindGrad:
        uses[storage_of(node.leaf)].pinned = true;
        uses[storage_of(node.grad)].pinned = true;
        uses[storage_of(node.grad)].reads.push_back(n);
        break;
    }
  }
  for (auto& [s, u] : uses) {
    // Only kernels write; one that reads what it writes has its node in `reads` too.
    const bool written_first = !u.writes.empty() && (u.reads.empty() || u.reads.front() > u.writes.front());
    u.first_use_writes_whole = written_first && writes_covering(g.nodes[u.writes.front()], s);
  }
  for (const Storage* s : refilled_buffers(g)) uses[s].pinned = true;
  for (const std::vector<Tensor>* list : {&g.outputs, &g.constants}) {
    for (const Tensor& t : *list) {
      if (const Storage* s = storage_of(t)) uses[s].pinned = true;
    }
  }
  return uses;
}

std::set<const Storage*> refilled_buffers(const Graph& g) {
  std::set<const Storage*> refilled;
  for (const Tensor& t : g.inputs) refilled.insert(storage_of(t));
  for (const Graph::GradInput& in : g.grad_inputs) {
    if (in.held.defined()) refilled.insert(storage_of(in.held));
  }
  return refilled;
}

bool GraphHolds::held_outside() const {
  if (storage.use_count() != static_cast<long>(impls.size())) return true;
  for (const auto& [impl, handles] : impls) {
    if (impl.use_count() != handles) return true;
  }
  return false;
}

std::map<const Storage*, GraphHolds> graph_holds(const Graph& g) {
  std::map<const Storage*, GraphHolds> holds;
  std::map<const TensorImpl*, long> handles;
  for_each_handle(g, [&](const Tensor& t) {
    if (!t.defined()) return;
    GraphHolds& h = holds[storage_of(t)];
    if (h.storage.expired()) h.storage = t.impl()->storage();
    if (++handles[t.impl()] == 1) h.impls.emplace_back(t.impl_ptr(), 0);
  });
  for (auto& [s, h] : holds) {
    for (auto& [impl, count] : h.impls) count = handles.at(impl.lock().get());
  }
  return holds;
}

std::set<const Storage*> held_outside(const Graph& g) {
  std::set<const Storage*> outside;
  for (const auto& [s, h] : graph_holds(g)) {
    if (h.held_outside()) outside.insert(s);
  }
  return outside;
}

bool covers_storage(const Tensor& t) {
  return t.defined() && t.is_contiguous() && t.impl()->storage_offset() == 0 &&
         static_cast<std::size_t>(t.numel()) * t.element_size() == t.impl()->storage()->nbytes();
}

bool is_whole_value(const Tensor& t, const Tensor& like) {
  return storage_of(t) == storage_of(like) && covers_storage(t) && t.sizes() == like.sizes();
}

bool same_view(const Tensor& a, const Tensor& b) {
  return storage_of(a) == storage_of(b) && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.impl()->storage_offset() == b.impl()->storage_offset() && a.dtype() == b.dtype();
}

std::size_t handles_on(const KernelCall& call, const Storage* s) {
  std::size_t count = 0;
  for (const Tensor* t : call.tensors()) count += storage_of(*t) == s;
  return count;
}

void apply_swaps(Graph& g, const std::vector<StorageSwap>& swaps) {
  for (const StorageSwap& swap : swaps) {
    for (std::size_t k : swap.nodes) {
      for (Tensor* t : g.nodes[k].call->tensors()) {
        if (storage_of(*t) == storage_of(swap.old)) *t = swap.replacement;
      }
    }
  }
}

Tensor with_geometry(const Tensor& over, const Tensor& like) {
  return with_geometry(over.impl()->storage(), like, Provenance{TensorOrigin::View, "compile", {}});
}

Tensor with_geometry(std::shared_ptr<Storage> storage, const Tensor& like, Provenance provenance) {
  const TensorImpl& l = *like.impl();
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), Shape(l.sizes().begin(), l.sizes().end()),
                                             Shape(l.strides().begin(), l.strides().end()), l.storage_offset(),
                                             l.dtype(), AutogradTerms{}, provenance));
}

std::optional<Tensor> compose_view(const Tensor& a, const Tensor& y, const Tensor& x) {
  if (storage_of(a) != storage_of(y) || a.dtype() != y.dtype() || x.dtype() != y.dtype() || !y.is_contiguous() ||
      x.sizes() != y.sizes()) {
    return std::nullopt;
  }
  const IntArrayRef sizes = y.sizes(), y_strides = y.strides(), x_strides = x.strides();
  const auto dims = static_cast<std::int64_t>(sizes.size());
  // Where a starts, as an index of y.
  std::int64_t rest = a.impl()->storage_offset() - y.impl()->storage_offset();
  if (rest < 0 || (a.numel() > 0 && rest >= y.numel())) return std::nullopt;
  std::vector<std::int64_t> start(sizes.size());
  for (std::int64_t j = 0; j < dims; ++j) {
    start[j] = rest / y_strides[j];
    rest %= y_strides[j];
  }
  // Each dim of a as pieces, outer first: (count, step in dim j of y, j), or a count with no step.
  struct Piece {
    std::int64_t count, step, dim;
  };
  std::vector<Piece> pieces;
  std::vector<std::int64_t> reach(start.begin(), start.end());  // the largest index each dim of y takes
  for (std::int64_t i = 0; i < a.dim(); ++i) {
    std::int64_t count = a.sizes()[i];
    const std::int64_t stride = a.strides()[i];
    if (count == 1 || stride == 0) {
      pieces.push_back({count, 0, -1});
      continue;
    }
    if (stride < 0) return std::nullopt;
    // The outermost dim of y whose stride divides a's: a's dim steps through it `step` at a time.
    std::int64_t j = 0;
    while (stride % y_strides[j] != 0) ++j;
    std::int64_t step = stride / y_strides[j];
    std::vector<Piece> inner_first;
    while (start[j] + (count - 1) * step >= sizes[j]) {
      // Past the end of dim j it carries into the dim outside: split where it wraps.
      if (j == 0 || sizes[j] % step != 0 || count % (sizes[j] / step) != 0 || start[j] >= step) return std::nullopt;
      const std::int64_t within = sizes[j] / step;
      inner_first.push_back({within, step, j});
      count /= within;
      step = 1;
      --j;
    }
    inner_first.push_back({count, step, j});
    for (auto p = inner_first.rbegin(); p != inner_first.rend(); ++p) {
      pieces.push_back(*p);
      reach[p->dim] += (p->count - 1) * p->step;
    }
  }
  // Every element's index of y is then the pieces' sum, dim by dim, with nothing carried.
  for (std::int64_t j = 0; j < dims; ++j) {
    if (reach[j] >= sizes[j]) return std::nullopt;
  }
  Shape out_sizes, out_strides;
  for (const Piece& p : pieces) {
    out_sizes.push_back(p.count);
    out_strides.push_back(p.dim < 0 ? 0 : p.step * x_strides[p.dim]);
  }
  std::int64_t offset = x.impl()->storage_offset();
  for (std::int64_t j = 0; j < dims; ++j) offset += start[j] * x_strides[j];
  return ops::make_view(x, out_sizes, out_strides, offset, "compile");
}

bool touched_between(const StorageUses& uses, std::size_t first, std::size_t last) {
  for (const std::vector<std::size_t>* list : {&uses.reads, &uses.writes}) {
    for (std::size_t n : *list) {
      if (n > first && n < last) return true;
    }
  }
  return false;
}

bool written_between(const StorageUses& uses, std::size_t first, std::size_t last) {
  for (std::size_t n : uses.writes) {
    if (n > first && n < last) return true;
  }
  return false;
}

}  // namespace kiln::compiler
