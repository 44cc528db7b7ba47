// compile/passes/fuse_unpool_weight_gradient.cpp — a first layer's weight and bias gradients
// read their dY straight from the max pool's backward, which then never writes it in NCHW. See
// Note [A thin layer's weight gradient read through its pool].
#include "compile/passes/fusion.h"
#include "core/routes.h"

namespace kiln::compiler {

// Note [A thin layer's weight gradient read through its pool]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The mirror of Note [A thin convolution pooled as it is made], in the backward. After
// fuse_pool_relu_backward and fuse_conv_bias_backward, train_cnn's first layer ends its
// backward with `D = max_pool2d_backward_relu(dV, I, V)` (12.8 MB at batch 128, three
// quarters zeros) and `dW, db = conv2d.backward_weight_bias(D, x)`, and nothing else reads D:
// the input needs no gradient. The thin weight gradient already copies each plane of D into a
// zero-padded buffer before it uses it, so it can build that plane from dV, I and V instead
// (ConvKernels::backward_weight_bias_through_max_pool) and D is never written or read back.
// A first layer on oneDNN's route (too many taps to be thin: 3 channels of 5x5) gets the same
// fusion: its weight primitive wants D in a channel-blocked layout, so D is unpooled straight
// into a temporary in that layout, as Note [Unpooled into the convolution's layout] does for a
// layer with an input gradient, and neither written in NCHW nor reordered.
// The pass fuses the two when the convolution is thin or on oneDNN's route, D is written by
// the pool's backward alone, read by the weight gradient alone, whole, and not pinned, and
// nothing in between writes dV, I, V or x. The fused call takes the weight gradient's place.
// Exactness: each plane is built by the pool backward's own rule in its order (zeros, then
// each window's gradient added onto its winner unless the pooled value is not positive,
// rounded to the dtype), so the weight gradient reads the same values as before and both
// gradients are the pair's, bit for bit (tests/compile checks Float32 and BFloat16); oneDNN's
// primitive reads D in the layout the pair reordered it to, so its gradients are the pair's too.

namespace {

using WeightBiasCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&,
                                 std::int64_t>;
using UnpoolCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&>;
using FusedCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Im2ColGeometry&, std::int64_t>;

}  // namespace

void fuse_unpool_weight_gradient(Graph& g) {
  const ConvKernels::BackwardWeightBiasThroughMaxPool fused =
      registered_kernels(DeviceType::CPU).conv2d.backward_weight_bias_through_max_pool;
  if (fused == nullptr) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  // Walks the weight gradients and looks back for the unpool that wrote their dY: every node
  // it removes lies before the one it visits.
  fuse_each<const WeightBiasCall>(g, KernelFamily::ConvBackwardWeightBias, [&](std::size_t m,
                                                                               const WeightBiasCall& call,
                                                                               std::vector<bool>& removed) {
    const auto& [grad_weight, grad_bias, grad_output, input, geometry, groups] = call.arguments();
    const routes::Route route = routes::cpu_conv2d(input.dtype(), grad_weight.sizes(), groups);
    if ((route != routes::Route::Thin && route != routes::Route::OneDnn) || !covers_storage(grad_output)) return;
    const StorageUses& d = uses[storage_of(grad_output)];
    if (!only_reader(d) || d.writes.front() >= m) return;
    const std::size_t n = d.writes.front();
    if (removed[n]) return;
    const auto* unpool_call = kernel_call<const UnpoolCall>(g.nodes[n], KernelFamily::MaxPoolBackwardRelu);
    if (unpool_call == nullptr) return;
    const auto& [unpooled, grad_pooled, indices, values] = unpool_call->arguments();
    if (storage_of(unpooled) != storage_of(grad_output) || !covers_storage(unpooled) ||
        unpooled.sizes() != grad_output.sizes()) {
      return;
    }
    if (written_between(uses[storage_of(grad_pooled)], n, m) || written_between(uses[storage_of(indices)], n, m) ||
        written_between(uses[storage_of(values)], n, m) || written_between(uses[storage_of(input)], n, m)) {
      return;
    }
    auto replacement = std::make_unique<FusedCall>(KernelId{KernelFamily::ConvBackwardWeightBiasThroughMaxPool, -1},
                                                   fused, grad_weight, grad_bias, grad_pooled, indices, values, input,
                                                   geometry, groups);
    Node& weight = g.nodes[m];
    weight.call = std::move(replacement);
    weight.made_by = "fuse_unpool_weight_gradient";
    removed[n] = true;
  });
}

}  // namespace kiln::compiler
