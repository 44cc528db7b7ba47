// compile/passes/fuse_unpool_conv_backward.cpp — a oneDNN convolution's two backward passes
// and the max pool's backward that feeds them become one kernel, which unpools the gradient
// straight into the layout both primitives read. See Note [Unpooled into the convolution's
// layout].
#include "compile/passes/fusion.h"
#include "core/backends.h"
#include "core/routes.h"

namespace kiln::compiler {

// Note [Unpooled into the convolution's layout]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The backward of Note [A convolution's blocked output pooled where it lies] (core/cpu/pool.cpp).
// After fuse_pool_relu_backward and fuse_conv_bias_backward, train_cnn's second layer's
// backward is
//     D = max_pool2d_backward_relu(dV, I, V)            12.8 MB at batch 128, in NCHW
//     dX = conv2d.backward_input(D, W)                   reorders D to nChw16c
//     dW, db = conv2d.backward_weight_bias(D, X)         reorders D to nChw16c again
// so D is written once and read three times only to be copied into the layout both primitives
// want. ConvKernels::backward_through_max_pool writes D in that layout to begin with (a
// temporary of the kernel, zero-padded in its last channel block as oneDNN requires) and runs
// both primitives on it. The pass fuses the three when:
//  - the convolution is not thin (a thin layer's weight gradient is fuse_unpool_weight_gradient's)
//    and oneDNN is built; a layout oneDNN does not serve gets the three kernels, D in scratch;
//  - D is written by the pool's backward alone, read by the two convolution passes alone, whole,
//    and not pinned, and both passes have the same geometry and groups;
//  - nothing between the pool's backward and the later pass writes dV, I, V, W or X, and nothing
//    between the two passes touches what the earlier one writes (the fused call takes the later
//    one's place).
// Exactness: D's elements are max_pool2d_backward_relu's, bit for bit (the same rule, the same
// order of sums), and the primitives are the ones the unfused calls ran, on D in the layout
// they reordered it to: dX, dW and db are the three calls', bit for bit.

namespace {

using UnpoolCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&>;
using InputCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t>;
using WeightBiasCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&,
                                 std::int64_t>;
using FusedCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t>;

}  // namespace

void fuse_unpool_conv_backward(Graph& g) {
  const ConvKernels::BackwardThroughMaxPool fused = registered_kernels(DeviceType::CPU).conv2d.backward_through_max_pool;
  if (fused == nullptr || !backends::onednn_is_available()) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  fuse_each<const UnpoolCall>(g, KernelFamily::MaxPoolBackwardRelu, [&](std::size_t n, const UnpoolCall& unpool_call,
                                                                        std::vector<bool>& removed) {
    const auto& [unpooled, grad_pooled, indices, values] = unpool_call.arguments();
    const Storage* d = storage_of(unpooled);
    if (!covers_storage(unpooled)) return;
    const StorageUses& d_uses = uses[d];
    if (d_uses.pinned || d_uses.writes.size() != 1 || d_uses.reads.size() != 2) return;
    const InputCall* input_call = nullptr;
    const WeightBiasCall* weight_call = nullptr;
    std::size_t input_at = 0, weight_at = 0;
    bool readers_are_kernels = true;
    for (std::size_t r : d_uses.reads) {
      const Node& reader = g.nodes[r];
      if (r <= n || removed[r] || reader.kind != Node::Kind::Kernel) {
        readers_are_kernels = false;
        break;
      }
      if (reader.call->id().family == KernelFamily::ConvBackwardInput) {
        input_call = dynamic_cast<const InputCall*>(reader.call.get());
        input_at = r;
      } else if (reader.call->id().family == KernelFamily::ConvBackwardWeightBias) {
        weight_call = dynamic_cast<const WeightBiasCall*>(reader.call.get());
        weight_at = r;
      }
    }
    if (!readers_are_kernels || input_call == nullptr || weight_call == nullptr) return;
    const auto& [grad_input, grad_output_i, weight, geometry, groups] = input_call->arguments();
    const auto& [grad_weight, grad_bias, grad_output_w, input, geometry_w, groups_w] = weight_call->arguments();
    if (!is_whole_value(grad_output_i, unpooled) || !is_whole_value(grad_output_w, unpooled) || groups != groups_w ||
        geometry != geometry_w ||
        routes::cpu_conv2d(input.dtype(), grad_weight.sizes(), groups) == routes::Route::Thin ||
        grad_input.sizes() != input.sizes()) {
      return;
    }
    const std::size_t first = std::min(input_at, weight_at), last = std::max(input_at, weight_at);
    bool moved_safely = true;
    for (const Tensor* read : {&grad_pooled, &indices, &values, &weight, &input}) {
      moved_safely = moved_safely && !written_between(uses[storage_of(*read)], n, last);
    }
    const std::vector<const Tensor*> earlier_writes =
        input_at < weight_at ? std::vector<const Tensor*>{&grad_input} : std::vector<const Tensor*>{&grad_weight, &grad_bias};
    for (const Tensor* written : earlier_writes) {
      moved_safely = moved_safely && !touched_between(uses[storage_of(*written)], first, last);
    }
    if (!moved_safely) return;
    Node& later = g.nodes[last];
    later.call = std::make_unique<FusedCall>(KernelId{KernelFamily::ConvBackwardThroughMaxPool, -1}, fused, grad_input,
                                             grad_weight, grad_bias, grad_pooled, indices, values, weight, input,
                                             geometry, groups);
    later.made_by = "fuse_unpool_conv_backward";
    removed[n] = true;
    removed[first] = true;
  });
}

}  // namespace kiln::compiler
