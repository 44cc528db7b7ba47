// compile/passes/read_heads_in_place.cpp — the fused attention kernels read q, k and v where the
// packed projection wrote them, and write their gradients where the cat would have put them:
// MultiheadAttention's copies of the heads and the cat of their gradients leave the step.
// See Note [Heads read where the projection wrote them].
#include <algorithm>
#include <optional>
#include <vector>

#include "compile/passes/fusion.h"

namespace kiln::compiler {

// Note [Heads read where the projection wrote them]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Self-attention projects q, k and v in one product (nn/attention.cpp, as PyTorch's
// _in_projection_packed): rows [L, N, 3E], chunked into three views with row stride 3E. Heads
// [N·H, L, D] of a chunk need `contiguous()` first, a copy of each, because head n·H + h starts
// at n·3E + h·D and no one batch stride walks that. Batch-first rows, [N, L, 3E] (Note
// [Batch-first rows stay in their order] in nn/attention.cpp), copy their heads to [N, H, L, D]
// for the same reason, and the backward's dO, [N, L, H, D] seen as heads, is one more copy.
// The backward mirrors it: the attention kernel writes dQ, dK and dV each whole, and a cat lays
// them side by side as the packed product's gradient [L, N, 3E] (or [N, L, 3E]). Both are data
// movement only; the kernels (core/cpu/attention.cpp) take heads through two batch strides,
// [N, H, L, D], so this pass
//   - points every read of a copy's result by the attention kernels at the copy's source, the
//     same elements seen through compose_view (compile/storage_uses.h), and drops the copy, when
//     those kernels are its only readers and nothing writes the source while they read it;
//   - points the attention backward's outputs that only a cat reads at their places in the cat's
//     result, and drops the cat, when every input of the cat is such an output.
// No value changes: the kernels read and write the same elements, in the same order. On
// train_charlm's compiled step this drops six copies of 512 KB and two cats of 1.5 MB (2 layers):
// the step with the pass against the step without it, turn by turn in one process, 1.010-1.013x
// (16.5-17.6 ms, 2-core Zen 4).

namespace {

using CopyCall = TypedCall<const Tensor&, const Tensor&>;
using CatCall = TypedCall<const Tensor&, const TensorList&, std::int64_t>;

bool attention_call(const Node& node) {
  if (node.kind != Node::Kind::Kernel) return false;
  const KernelFamily f = node.call->id().family;
  return f == KernelFamily::AttentionForward || f == KernelFamily::AttentionBackward;
}

/// Whether `composed` is what the kernels take for `head`, a [B, rows, D] operand: the same, or
/// [B1, B2, rows, D] with its heads split in two, rows contiguous either way; for a
/// [B1, B2, rows, D] operand, the same sizes.
bool same_heads(const Tensor& head, const Tensor& composed) {
  if ((composed.dim() != 3 && composed.dim() != 4) || composed.strides()[composed.dim() - 1] != 1) return false;
  if (head.dim() == 4) return composed.sizes() == head.sizes();
  if (head.dim() != 3) return false;
  const IntArrayRef h = head.sizes(), c = composed.sizes();
  return c[c.size() - 2] == h[1] && c[c.size() - 1] == h[2] && (c.size() == 3 || c[0] * c[1] == h[0]);
}

/// Each argument over `y`'s storage in the nodes `at`, seen through compose_view onto `x`, with
/// where it goes; nothing when one is not a head operand afterwards (or is written, when
/// `reads_only`).
std::optional<std::vector<std::pair<Tensor*, Tensor>>> composed_arguments(Graph& g, const std::vector<std::size_t>& at,
                                                                         const Tensor& y, const Tensor& x,
                                                                         bool reads_only) {
  std::vector<std::pair<Tensor*, Tensor>> out;
  for (std::size_t n : at) {
    const std::vector<Tensor*> args = g.nodes[n].call->tensors();
    const std::vector<bool> written = std::as_const(*g.nodes[n].call).writes();
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (storage_of(*args[i]) != storage_of(y)) continue;
      if (reads_only && written[i]) return std::nullopt;
      std::optional<Tensor> composed = compose_view(*args[i], y, x);
      if (!composed || !same_heads(*args[i], *composed)) return std::nullopt;
      out.emplace_back(args[i], std::move(*composed));
    }
  }
  return out;
}

void assign(const std::vector<std::pair<Tensor*, Tensor>>& retargets) {
  for (const auto& [arg, view] : retargets) *arg = view;
}

/// The copy at node n, when its result is read only by attention kernels, which then read its source.
bool read_past_copy(Graph& g, std::size_t n, std::map<const Storage*, StorageUses>& uses) {
  const CopyCall* copy = kernel_call<CopyCall>(g.nodes[n], KernelFamily::Copy);
  if (copy == nullptr) return false;
  const auto& [dst, src] = copy->arguments();
  if (!covers_storage(dst) || src.dtype() != dst.dtype() || src.sizes() != dst.sizes()) return false;
  const StorageUses& u = uses[storage_of(dst)];
  if (u.pinned || u.writes.size() != 1 || u.reads.empty()) return false;
  for (std::size_t r : u.reads) {
    if (!attention_call(g.nodes[r])) return false;
  }
  // The source keeps the copied values until the last of them has read it (and is a value of
  // the step's own, which no region or caller changes in between).
  const StorageUses& source = uses[storage_of(src)];
  if (source.pinned || written_between(source, n, u.reads.back() + 1)) return false;
  const auto retargets = composed_arguments(g, u.reads, dst, src, /*reads_only=*/true);
  if (!retargets) return false;
  assign(*retargets);
  return true;
}

/// The cat at node n, when each of its inputs is an attention backward's output read by it
/// alone, which then writes its place in the cat's result.
bool write_into_cat(Graph& g, std::size_t n, std::map<const Storage*, StorageUses>& uses) {
  const CatCall* cat = kernel_call<CatCall>(g.nodes[n], KernelFamily::Cat);
  if (cat == nullptr) return false;
  const auto& [out, inputs, dim] = cat->arguments();
  const StorageUses& out_uses = uses[storage_of(out)];
  if (out_uses.writes.size() != 1 || inputs.empty()) return false;
  std::vector<std::pair<Tensor*, Tensor>> retargets;
  std::int64_t at = 0;
  std::size_t first_writer = n;
  for (const Tensor& input : inputs) {
    const std::int64_t length = input.defined() && input.dim() > 0 ? input.sizes()[static_cast<std::size_t>(dim)] : 0;
    const StorageUses& u = uses[storage_of(input)];
    if (!covers_storage(input) || u.pinned || u.writes.size() != 1 || u.reads.size() != 1 || u.reads[0] != n ||
        input.dtype() != out.dtype()) {
      return false;
    }
    const std::size_t writer = u.writes[0];
    if (g.nodes[writer].kind != Node::Kind::Kernel ||
        g.nodes[writer].call->id().family != KernelFamily::AttentionBackward) {
      return false;
    }
    const Tensor place = out.narrow(dim, at, length);
    auto more = composed_arguments(g, {writer}, input, place, /*reads_only=*/false);
    if (!more) return false;
    retargets.insert(retargets.end(), more->begin(), more->end());
    first_writer = std::min(first_writer, writer);
    at += length;
  }
  // The result's memory is written earlier now: nothing may use it in between.
  if (at != out.sizes()[static_cast<std::size_t>(dim)] || touched_between(out_uses, first_writer, n)) return false;
  assign(retargets);
  return true;
}

}  // namespace

void read_heads_in_place(Graph& g) {
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  std::vector<bool> removed(g.nodes.size(), false);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    // Each change leaves other storages' uses as they were, except that a dropped node's are
    // gone: a later decision reading them only sees one use too many, and declines.
    if (read_past_copy(g, n, uses) || write_into_cat(g, n, uses)) removed[n] = true;
  }
  remove_nodes(g, removed);
}

}  // namespace kiln::compiler
