// compile/passes/fuse_pool_relu_backward.cpp — max pooling's backward and relu's backward
// (threshold_backward) behind it become one kernel that masks on the pooled values. See
// Note [Relu's backward through a max pool].
#include "compile/passes/fusion.h"

namespace kiln::compiler {

// Note [Relu's backward through a max pool]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// In `Y = relu(...); V, I = max_pool2d(Y)` the backward runs
//   G = max_pool2d_backward(dV, I)        // each window's gradient onto its winner
//   R = threshold_backward(G, Y)          // kept where Y > 0 (NaN passes)
// two passes over input-sized tensors, the second reading Y (12.8 MB in train_cnn's first
// layer). Only winners receive gradient, and a winner's Y is its window's V: so R is
// max_pool2d_backward_relu(dV, I, V), which drops a window's gradient when V <= 0, in one pass
// over the small pooled tensors plus the write of R (MaxPoolBackwardReluKernel). The pass
// fuses the pair when:
//  - G is written only by the pool's backward and read only by the threshold, whose other
//    argument is the whole of Y, and neither G nor R is pinned;
//  - a max_pool2d forward earlier in the graph took Y as its input and wrote I as its indices;
//    its values V are written there only and by nothing after (they must hold at the backward);
//  - nothing between the two backward kernels touches R.
// Exactness: every winner's sum is the same sum, kept or dropped by the same test on the same
// value (threshold_backward tests Y at the winner, which is V); losers are 0 either way.

namespace {

using PoolBackwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&>;
using FusedCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&>;

/// The max_pool2d forward (values, indices, input) before `before` whose input is `y` and indices `i`.
const Node* pool_forward(const Graph& g, std::size_t before, const Storage* y, const Storage* i) {
  for (std::size_t n = before; n-- > 0;) {
    const Node& node = g.nodes[n];
    if (node.kind != Node::Kind::Kernel || node.call->id().family != KernelFamily::MaxPool) continue;
    const std::vector<const Tensor*> args = std::as_const(*node.call).tensors();  // (values, indices, input)
    if (storage_of(*args[1]) == i && storage_of(*args[2]) == y) return &node;
  }
  return nullptr;
}

}  // namespace

void fuse_pool_relu_backward(Graph& g) {
  const MaxPoolBackwardReluKernel fused = registered_kernels(DeviceType::CPU).max_pool2d_backward_relu;
  if (fused == nullptr) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  fuse_each<PoolBackwardCall>(g, KernelFamily::MaxPoolBackward, [&](std::size_t n, PoolBackwardCall& call,
                                                                    std::vector<bool>& removed) {
    const std::vector<Tensor*> args = call.tensors();  // (G, dV, I)
    const Tensor grad = *args[0], pooled_grad = *args[1], indices = *args[2];
    if (!covers_storage(grad)) return;
    const std::optional<std::size_t> m = only_reader(uses[storage_of(grad)]);
    if (!m || *m <= n || removed[*m]) return;
    Node& threshold = g.nodes[*m];
    if (threshold.kind != Node::Kind::Kernel || !threshold.call->id().is(BinaryOp::ThresholdBackward)) return;
    const std::vector<Tensor*> t_args = threshold.call->tensors();  // (R, G, Y)
    const Tensor result = *t_args[0], y = *t_args[2];
    if (storage_of(*t_args[1]) != storage_of(grad) || !covers_storage(*t_args[1]) || !covers_storage(y)) return;
    if (result.sizes() != grad.sizes() || result.dtype() != grad.dtype() || !result.is_contiguous()) return;
    if (uses[storage_of(result)].pinned && storage_of(result) != storage_of(grad)) return;
    if (storage_of(result) != storage_of(grad) && touched_between(uses[storage_of(result)], n, *m)) return;
    const Node* forward = pool_forward(g, n, storage_of(y), storage_of(indices));
    if (forward == nullptr) return;
    const Tensor values = *std::as_const(*forward->call).tensors()[0];
    const StorageUses& v_uses = uses[storage_of(values)];
    if (v_uses.writes.size() != 1 || !covers_storage(values) || values.dtype() != grad.dtype()) return;
    Node& backward = g.nodes[n];
    backward.call = std::make_unique<FusedCall>(KernelId{KernelFamily::MaxPoolBackwardRelu, -1}, fused, result,
                                                pooled_grad, indices, values);
    backward.made_by = "fuse_pool_relu_backward";
    removed[*m] = true;
  });
}

}  // namespace kiln::compiler
