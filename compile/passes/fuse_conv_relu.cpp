// compile/passes/fuse_conv_relu.cpp — a convolution whose output only relu reads becomes one
// kernel that writes relu's output directly. See Note [Convolution and relu in one pass].
#include "compile/passes/fusion.h"

namespace kiln::compiler {

// Note [Convolution and relu in one pass]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Eagerly, conv2d writes its output (12.8 MB for train_cnn's first layer at batch 128), then
// relu reads it all back and writes a second tensor of the same size. Kiln's thin kernel applies
// relu as it stores each row (ConvKernels::forward_relu), so the pair is one pass and the
// convolution's own output never exists. oneDNN could apply relu as a post-op, but its relu
// turns NaN into 0 (Note [oneDNN's relu drops NaN] in core/onednn/runtime.h), so on its route
// the fused kernel applies Kiln's relu in place after the convolution: one tensor instead of
// two, the same passes; what pays there is the next fusion, fuse_conv_pool, which reads the
// convolution's blocked output once and applies relu as it reads. The pass fuses
// `A = conv2d.forward(x, w, b); B = relu(A)` when:
//  - relu reads all of A and nothing else reads A, A is written only by the convolution, and A
//    is not pinned (an output, a region's read, a gradient);
//  - nothing between the two touches B, whose write moves up to the convolution's place.
// relu's backward reads B (threshold_backward(grad, B)), never A, so autograd never saved A.
// Exactness: the convolution computes the same sums; relu(v) is the same function of v either
// way (Kiln's: negatives to zero, NaN kept), so B is the pair's bit for bit.

namespace {

using ConvCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&,
                           std::int64_t>;

}  // namespace

void fuse_conv_relu(Graph& g) {
  const ConvKernels::Forward fused = registered_kernels(DeviceType::CPU).conv2d.forward_relu;
  if (fused == nullptr) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  fuse_each<ConvCall>(g, KernelFamily::ConvForward, [&](std::size_t n, ConvCall& call, std::vector<bool>& removed) {
    const Tensor a = *call.tensors()[0];
    if (!covers_storage(a)) return;
    const std::optional<std::size_t> m = only_reader(uses[storage_of(a)]);
    if (!m || *m <= n || removed[*m]) return;
    Node& relu = g.nodes[*m];
    if (relu.kind != Node::Kind::Kernel || !relu.call->id().is(UnaryOp::Relu)) return;
    const std::vector<Tensor*> relu_args = relu.call->tensors();  // (out, in)
    const Tensor b = *relu_args[0];
    if (!relu_args[1]->is_same(a) && !(storage_of(*relu_args[1]) == storage_of(a) && covers_storage(*relu_args[1]))) {
      return;
    }
    if (b.sizes() != a.sizes() || b.dtype() != a.dtype() || !b.is_contiguous()) return;
    if (storage_of(b) != storage_of(a) && touched_between(uses[storage_of(b)], n, *m)) return;
    std::unique_ptr<ConvCall> replacement = call.retarget({KernelFamily::ConvForwardRelu, -1}, fused);
    *replacement->tensors()[0] = b;
    Node& conv = g.nodes[n];
    conv.call = std::move(replacement);
    conv.made_by = "fuse_conv_relu";
    removed[*m] = true;
  });
}

}  // namespace kiln::compiler
