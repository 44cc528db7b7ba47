// compile/passes/fuse_attention.cpp — scaled dot-product attention's products, scale, mask and
// softmax become one kernel forward and one backward, each working a head at a time in cache.
// See Note [Attention as one kernel].
#include <algorithm>
#include <array>
#include <map>

#include "compile/passes/fusion.h"

namespace kiln::compiler {

// Note [Attention as one kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// scaled_dot_product_attention (autograd/functions/attention.cpp) runs, over all heads at once,
//   S = bmm(Q, Kᵀ);  X = S · scale [+ M];  P = softmax(X);  O = bmm(P, V)
// and its backward
//   dV = bmm(Pᵀ, dO);  dP = bmm(dO, Vᵀ);  dS = softmax_backward(dP, P);
//   dQ = bmm(dS, K) · scale;  dK = bmm(dSᵀ, Q) · scale.
// The pass finds that shape in the graph by its values, not by names: a softmax over the last
// dim whose input is made by a mul by a 0-dim scale (and an add of a mask) of a product's
// result, each the only reader of the one before, and whose result P is read by a product
// with V. Those calls become attention.forward, at the place of the product with V, writing
// P (the backward reads it) and O; S and X are never stored. A softmax_backward of that P whose
// dP is a product of the same dO with Vᵀ, whose dS is read by exactly the two products with K
// and with Q, each read by only a mul by the same scale, together with the product of Pᵀ and
// dO, becomes attention.backward at the place of the last of them. A shape that does not fit
// (dropout's mask multiplied into P, a mask that is itself differentiated, a row stride other
// than 1) is left as it is. On train_charlm's compiled step (2-core Zen 4, the step with the pass
// and without it turn by turn in one process) this made the step 1.10-1.15x faster.
// Exactness: the scores, the scale, the mask and the softmax are computed as eager computes
// them, operation for operation; the products sum in k's order with one accumulator each,
// which need not be the order oneDNN's products take, so the results can differ from the
// unfused step's in the last bits. tests/compile/test_fuse_attention.cpp compares both kernels
// with Float64, and the compiled step with eager.

namespace {

using BmmCall = TypedCall<const Tensor&, const Tensor&, const Tensor&>;
using BinaryCall = TypedCall<const Tensor&, const Tensor&, const Tensor&>;
using SoftmaxCall = TypedCall<const Tensor&, const Tensor&, std::int64_t, bool>;
using SoftmaxBackwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, std::int64_t, bool>;
using ForwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&>;
using BackwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const Tensor&, const Tensor&>;

/// [B, rows, D] (or, with dims 4, [B1, B2, rows, D]) on the CPU with contiguous rows, Float32
/// or Float64: what the kernels read and write.
bool head_rows(const Tensor& t, std::int64_t dims = 3) {
  return t.defined() && t.dim() == dims && t.strides()[dims - 1] == 1 && t.device().type() == DeviceType::CPU &&
         (t.dtype() == kFloat32 || t.dtype() == kFloat64);
}

/// Whether t has exactly these sizes.
bool sized(const Tensor& t, std::initializer_list<std::int64_t> sizes) {
  return t.sizes() == IntArrayRef(sizes);
}

/// What a fused forward leaves for its backward to match.
struct FusedForward {
  Tensor q, k, v, scale;
};

class AttentionFusion {
 public:
  explicit AttentionFusion(Graph& g, const AttentionKernels& kernels)
      : g_(g), kernels_(kernels), uses_(storage_uses(g)), removed_(g.nodes.size(), false) {}

  void run() {
    for (std::size_t n = 0; n < g_.nodes.size(); ++n) {
      if (!removed_[n]) fuse_forward_at(n);
    }
    for (std::size_t n = 0; n < g_.nodes.size(); ++n) {
      if (!removed_[n]) fuse_backward_at(n);
    }
    remove_nodes(g_, removed_);
  }

 private:
  StorageUses& uses(const Tensor& t) { return uses_[storage_of(t)]; }

  /// The node that alone writes `t`'s storage and whose only reader is `reader`, when `t` is
  /// all of that storage.
  std::optional<std::size_t> made_only_for(const Tensor& t, std::size_t reader) {
    if (!covers_storage(t)) return std::nullopt;
    const StorageUses& u = uses(t);
    const std::optional<std::size_t> w = only_writer(u), r = only_reader(u);
    if (!w || !r || *r != reader || *w >= reader || removed_[*w]) return std::nullopt;
    return w;
  }

  /// Where a result [B, rows, D] written at node `at` goes when its only reader, later, is a copy
  /// that puts attention's heads back side by side: of its transpose, [rows, B, D] (sequence-first
  /// rows), or of its heads split as [B1, B2, rows, D] and transposed, [B1, rows, B2, D]
  /// (batch-first rows, Note [Batch-first rows stay in their order] in nn/attention.cpp). Then
  /// the copy's destination, seen as [B, rows, D] or [B1, B2, rows, D], and the copy is dropped;
  /// else the result itself.
  Tensor written_past_its_copy(const Tensor& result, std::size_t at) {
    const StorageUses& u = uses(result);
    const std::optional<std::size_t> r = only_reader(u);
    if (!covers_storage(result) || !r || *r <= at || removed_[*r] || u.writes.size() != 1) return result;
    using CopyCall = TypedCall<const Tensor&, const Tensor&>;
    CopyCall* copy = kernel_call<CopyCall>(g_.nodes[*r], KernelFamily::Copy);
    if (copy == nullptr) return result;
    const auto& [dst, src] = copy->arguments();
    if (dst.dtype() != result.dtype() || touched_between(uses(dst), at, *r)) return result;
    std::optional<Tensor> place;
    if (dst.dim() == 3 && same_view(src, result.transpose(0, 1)) && head_rows(dst.transpose(0, 1))) {
      place = dst.transpose(0, 1);
    } else if (dst.dim() == 4 && result.is_contiguous() && head_rows(dst.transpose(1, 2), 4)) {
      const std::int64_t b1 = dst.sizes()[0], rows = dst.sizes()[1], b2 = dst.sizes()[2], d = dst.sizes()[3];
      if (b1 * b2 == result.sizes()[0] && rows == result.sizes()[1] && d == result.sizes()[2] &&
          same_view(src, result.view({b1, b2, rows, d}).transpose(1, 2))) {
        place = dst.transpose(1, 2);
      }
    }
    if (!place) return result;
    removed_[*r] = true;
    return *place;
  }

  /// The mul by a 0-dim scale at node n: (its input, the scale).
  std::optional<std::pair<Tensor, Tensor>> scaled(std::size_t n) {
    BinaryCall* mul = kernel_call<BinaryCall>(g_.nodes[n], KernelFamily::Binary);
    if (mul == nullptr || !mul->id().is(BinaryOp::Mul)) return std::nullopt;
    const std::vector<Tensor*> args = mul->tensors();  // (out, x, scale)
    const Tensor& scale = *args[2];
    if (scale.dim() != 0 || scale.dtype() != args[0]->dtype() || !covers_storage(*args[1])) return std::nullopt;
    return std::make_pair(*args[1], scale);
  }

  void fuse_forward_at(std::size_t s) {
    SoftmaxCall* softmax = kernel_call<SoftmaxCall>(g_.nodes[s], KernelFamily::SoftmaxForward);
    if (softmax == nullptr) return;
    const auto [p, x, dim, log] = softmax->arguments();
    if (log || x.dim() != 3 || dim != 2 || !covers_storage(p) || !head_rows(x) || x.numel() == 0) return;
    const std::optional<std::size_t> x_node = made_only_for(x, s);
    if (!x_node) return;
    // X = S · scale, or X = (S · scale) + M.
    Tensor mask;
    std::optional<std::size_t> add_node, mul_node = x_node;
    if (BinaryCall* add = kernel_call<BinaryCall>(g_.nodes[*x_node], KernelFamily::Binary); add && add->id().is(BinaryOp::Add)) {
      const std::vector<Tensor*> args = add->tensors();  // (X, X1, M)
      if (!args[2]->defined() || args[2]->dtype() != x.dtype() || args[2]->dim() > 3) return;
      mask = args[2]->expand(x.sizes());
      if (mask.strides()[2] != 1 && x.sizes()[2] > 1) return;
      add_node = x_node;
      mul_node = made_only_for(*args[1], *x_node);
      if (!mul_node) return;
    }
    const auto scaled_input = scaled(*mul_node);
    if (!scaled_input) return;
    const auto& [scores, scale] = *scaled_input;
    const std::optional<std::size_t> qk_node = made_only_for(scores, *mul_node);
    if (!qk_node) return;
    BmmCall* qk = kernel_call<BmmCall>(g_.nodes[*qk_node], KernelFamily::Bmm);
    if (qk == nullptr) return;
    const Tensor q = std::get<1>(qk->arguments()), k = std::get<2>(qk->arguments()).transpose(1, 2);
    const std::int64_t B = x.size(0), L = x.size(1), S = x.size(2), D = q.dim() == 3 ? q.size(2) : 0;
    if (!head_rows(q) || !head_rows(k) || q.dtype() != x.dtype() || k.dtype() != x.dtype() || D == 0 ||
        !sized(q, {B, L, D}) || !sized(k, {B, S, D}) || scores.sizes() != x.sizes() || p.sizes() != x.sizes()) {
      return;
    }
    // O = bmm(P, V): the first product that reads the whole of P.
    std::optional<std::size_t> pv_node;
    for (std::size_t r : uses(p).reads) {
      if (r <= s || removed_[r]) continue;
      BmmCall* pv = kernel_call<BmmCall>(g_.nodes[r], KernelFamily::Bmm);
      if (pv != nullptr && same_view(std::get<1>(pv->arguments()), p)) pv_node = r;
      break;
    }
    if (!pv_node || uses(p).writes.size() != 1) return;
    BmmCall* pv = kernel_call<BmmCall>(g_.nodes[*pv_node], KernelFamily::Bmm);
    const Tensor o = std::get<0>(pv->arguments()), v = std::get<2>(pv->arguments());
    if (!head_rows(o) || !head_rows(v) || v.dtype() != x.dtype() || !sized(o, {B, L, D}) || !sized(v, {B, S, D})) return;
    // Their inputs keep their values from the first call to the last (the fused one reads them there).
    for (const Tensor* t : std::initializer_list<const Tensor*>{&q, &k, &v, &scale, &mask}) {
      if (t->defined() && written_between(uses(*t), *qk_node, *pv_node)) return;
    }
    if (storage_of(o) != storage_of(p) && touched_between(uses(o), *qk_node, *pv_node)) return;
    Node& node = g_.nodes[*pv_node];
    node.call = std::make_unique<ForwardCall>(KernelId{KernelFamily::AttentionForward, -1}, kernels_.forward,
                                              written_past_its_copy(o, *pv_node), p, q, k, v, mask, scale);
    node.made_by = "fuse_attention";
    for (std::optional<std::size_t> m : {qk_node, mul_node, add_node, std::optional<std::size_t>(s)}) {
      if (m) removed_[*m] = true;
    }
    fused_[storage_of(p)] = FusedForward{q, k, v, scale};
  }

  /// The product at node n of a view of `a` (transposed or not) and the whole `other`: its
  /// output, when it is all of its storage.
  std::optional<Tensor> product_of(std::size_t n, const Tensor& a_view, const Tensor& c_view) {
    BmmCall* call = kernel_call<BmmCall>(g_.nodes[n], KernelFamily::Bmm);
    if (call == nullptr) return std::nullopt;
    const auto& [out, a, c] = call->arguments();
    if (!same_view(a, a_view) || !same_view(c, c_view)) return std::nullopt;
    return Tensor(out);
  }

  void fuse_backward_at(std::size_t sb) {
    SoftmaxBackwardCall* call = kernel_call<SoftmaxBackwardCall>(g_.nodes[sb], KernelFamily::SoftmaxBackward);
    if (call == nullptr) return;
    const auto [ds, dp, p, dim, log] = call->arguments();
    const auto fused = fused_.find(storage_of(p));
    if (fused == fused_.end() || log || dim != 2 || !covers_storage(p) || !covers_storage(ds)) return;
    const FusedForward& f = fused->second;
    // dP = bmm(dO, Vᵀ), read by this softmax_backward alone.
    const std::optional<std::size_t> dp_node = made_only_for(dp, sb);
    if (!dp_node) return;
    BmmCall* dp_call = kernel_call<BmmCall>(g_.nodes[*dp_node], KernelFamily::Bmm);
    if (dp_call == nullptr || !same_view(std::get<2>(dp_call->arguments()), f.v.transpose(1, 2))) return;
    const Tensor d_out = std::get<1>(dp_call->arguments());
    if (!head_rows(d_out)) return;
    // dV = bmm(Pᵀ, dO), somewhere among P's readers.
    std::optional<std::size_t> dv_node;
    Tensor dv;
    for (std::size_t r : uses(p).reads) {
      if (removed_[r]) continue;
      if (const auto out = product_of(r, p.transpose(1, 2), d_out)) {
        dv_node = r;
        dv = *out;
        break;
      }
    }
    if (!dv_node) return;
    // dQ = bmm(dS, K) · scale and dK = bmm(dSᵀ, Q) · scale: dS's only two readers.
    const StorageUses& ds_uses = uses(ds);
    if (ds_uses.pinned || ds_uses.writes.size() != 1 || ds_uses.reads.size() != 2) return;
    std::array<std::size_t, 2> product_nodes{}, mul_nodes{};
    std::array<Tensor, 2> grads;  // dQ, dK
    for (std::size_t r : ds_uses.reads) {
      int which = -1;
      std::optional<Tensor> t;
      if ((t = product_of(r, ds, f.k))) which = 0;
      else if ((t = product_of(r, ds.transpose(1, 2), f.q))) which = 1;
      if (which < 0 || removed_[r] || !covers_storage(*t)) return;
      const std::optional<std::size_t> m = only_reader(uses(*t));
      if (!m || removed_[*m]) return;
      const auto input = scaled(*m);
      if (!input || !same_view(input->first, *t) || storage_of(input->second) != storage_of(f.scale)) return;
      product_nodes[which] = r;
      mul_nodes[which] = *m;
      grads[which] = *kernel_call<BinaryCall>(g_.nodes[*m], KernelFamily::Binary)->tensors()[0];
    }
    if (product_nodes[0] == product_nodes[1] || !head_rows(grads[0]) || !head_rows(grads[1]) || !head_rows(dv) ||
        grads[0].sizes() != f.q.sizes() || grads[1].sizes() != f.k.sizes() || dv.sizes() != f.v.sizes() ||
        d_out.sizes() != f.q.sizes()) {
      return;
    }
    const std::array<std::size_t, 7> matched{*dv_node, *dp_node, sb, product_nodes[0], mul_nodes[0],
                                             product_nodes[1], mul_nodes[1]};
    const std::size_t first = *std::min_element(matched.begin(), matched.end());
    const std::size_t last = *std::max_element(matched.begin(), matched.end());
    const auto matched_node = [&](std::size_t n) { return std::find(matched.begin(), matched.end(), n) != matched.end(); };
    // Nothing else between the first and the last touches what the fused call reads or writes.
    for (const Tensor* t : std::initializer_list<const Tensor*>{&f.q, &f.k, &f.v, &p, &d_out, &dv, &grads[0], &grads[1]}) {
      const StorageUses& u = uses(*t);
      for (const auto* list : {&u.reads, &u.writes}) {
        for (std::size_t n : *list) {
          if (n > first && n < last && !matched_node(n)) return;
        }
      }
    }
    Node& node = g_.nodes[last];
    node.call = std::make_unique<BackwardCall>(KernelId{KernelFamily::AttentionBackward, -1}, kernels_.backward,
                                               written_past_its_copy(grads[0], last), written_past_its_copy(grads[1], last),
                                               written_past_its_copy(dv, last), d_out, f.q, f.k, f.v, p, f.scale);
    node.made_by = "fuse_attention";
    for (std::size_t n : matched) {
      if (n != last) removed_[n] = true;
    }
  }

  Graph& g_;
  AttentionKernels kernels_;
  std::map<const Storage*, StorageUses> uses_;
  std::vector<bool> removed_;
  std::map<const Storage*, FusedForward> fused_;
};

}  // namespace

void fuse_attention(Graph& g) {
  const AttentionKernels kernels = registered_kernels(DeviceType::CPU).attention;
  if (kernels.forward == nullptr || kernels.backward == nullptr) return;
  AttentionFusion(g, kernels).run();
}

}  // namespace kiln::compiler
