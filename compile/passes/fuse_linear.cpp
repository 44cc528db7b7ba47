// compile/passes/fuse_linear.cpp — linear's forward (a matrix product, the bias added, and
// often relu) becomes one kernel. See Note [Linear in one kernel].
#include "compile/passes/fusion.h"

namespace kiln::compiler {

// Note [Linear in one kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// nn::Linear runs `O = bmm(x, wᵀ); Y = O + bias`, and an MLP then `Z = relu(Y)`: three kernels
// and two extra passes over the activations. oneDNN's matmul adds a bias as it writes each
// output block (BmmBiasKernel); relu is then Kiln's, over the result while it is still in cache
// (oneDNN's relu post-op turns NaN into 0: Note [oneDNN's relu drops NaN] in
// core/onednn/runtime.h). So the pass makes one call of
// `O = bmm(x, wᵀ)` + `Y = add(O, bias)` [+ `Z = relu(Y)`] when:
//  - O is written by the product alone and read by the add alone, and the add reads the whole
//    of O (a [B, N] view of the product's [1, B, N]) and a contiguous bias [N];
//  - for relu too: Y is read by relu alone (relu's backward reads Z), and Y is not pinned;
//  - nothing in between touches the storage that now receives the result early.
// Exactness: the product's sums are unchanged, and the bias is added to each rounded sum in
// the same precision, once, as the separate add did; relu is the same function of the result.

namespace {

using BmmCall = TypedCall<const Tensor&, const Tensor&, const Tensor&>;
using FusedCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool>;

}  // namespace

void fuse_linear(Graph& g) {
  const BmmBiasKernel fused = registered_kernels(DeviceType::CPU).bmm_bias;
  if (fused == nullptr) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  fuse_each<BmmCall>(g, KernelFamily::Bmm, [&](std::size_t n, BmmCall& call, std::vector<bool>& removed) {
    const std::vector<Tensor*> args = call.tensors();  // (O, x, wᵀ)
    const Tensor out = *args[0];
    if (!covers_storage(out) || out.dim() != 3) return;
    const std::optional<std::size_t> m = only_reader(uses[storage_of(out)]);
    if (!m || *m <= n || removed[*m]) return;
    Node& add = g.nodes[*m];
    if (add.kind != Node::Kind::Kernel || !add.call->id().is(BinaryOp::Add)) return;
    const std::vector<Tensor*> add_args = add.call->tensors();  // (Y, O, bias)
    const Tensor bias = *add_args[2];
    if (storage_of(*add_args[1]) != storage_of(out) || !covers_storage(*add_args[1]) || bias.dim() != 1 ||
        bias.sizes()[0] != out.sizes()[2] || !bias.is_contiguous() || bias.dtype() != out.dtype()) {
      return;
    }
    Tensor result = *add_args[0];
    std::size_t last = *m;
    if (!covers_storage(result) || result.numel() != out.numel() || result.dtype() != out.dtype()) return;
    // relu after the add, when the add's result has no other reader.
    bool relu = false;
    if (const std::optional<std::size_t> r = only_reader(uses[storage_of(result)]); r && *r > *m && !removed[*r]) {
      Node& next = g.nodes[*r];
      const std::vector<Tensor*> relu_args = next.kind == Node::Kind::Kernel ? next.call->tensors()
                                                                             : std::vector<Tensor*>{};
      if (next.kind == Node::Kind::Kernel && next.call->id().is(UnaryOp::Relu) && covers_storage(*relu_args[0]) &&
          covers_storage(*relu_args[1]) && storage_of(*relu_args[1]) == storage_of(result) &&
          relu_args[0]->numel() == out.numel() &&
          (storage_of(*relu_args[0]) == storage_of(result) ||
           !touched_between(uses[storage_of(*relu_args[0])], n, *r))) {
        relu = true;
        result = *relu_args[0];
        last = *r;
      }
    }
    if (storage_of(result) != storage_of(out) && touched_between(uses[storage_of(result)], n, last)) return;
    Node& product = g.nodes[n];
    product.call = std::make_unique<FusedCall>(KernelId{KernelFamily::BmmBias, -1}, fused, with_geometry(result, out),
                                               *args[1], *args[2], bias, relu);
    product.made_by = "fuse_linear";
    removed[*m] = true;
    if (relu) removed[last] = true;
  });
}

}  // namespace kiln::compiler
