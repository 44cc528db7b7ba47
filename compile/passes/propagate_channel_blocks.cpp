// compile/passes/propagate_channel_blocks.cpp — the activation between a thin first layer and a
// oneDNN convolution after it, and that activation's gradient, cross in the channel blocks the
// convolution's primitives read and write, not in NCHW. See Note [Layouts that flow between
// layers].
#include "compile/passes/fusion.h"
#include "core/backends.h"
#include "core/cpu/channel_blocks.h"
#include "core/cpu/pool_record.h"
#include "core/creation.h"
#include "core/onednn/onednn.h"
#include "core/routes.h"

namespace kiln::compiler {

// Note [Layouts that flow between layers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After the fusion passes and record_pool_windows, train_cnn's two layers meet at one value:
//   V, R1 = conv2d.forward_relu_max_pool(x, w1, b1)        thin: V in NCHW, 3.2 MB at batch 128
//   P, R2 = conv2d.forward_relu_max_pool(V, w2, b2)        oneDNN: reorders V to nChw16c
//   ...
//   dV, dw2, db2 = conv2d.backward_through_max_pool(dP, R2, P, w2, V)
//                                                          reorders V again, and dV back to NCHW
//   dw1, db1 = conv2d.backward_weight_bias_through_max_pool(dV, R1, V, x)
// Nothing reads V or dV in NCHW: only oneDNN's primitives, which want them blocked, and the thin
// kernels at the other end, which can write V and read dV in any layout as cheaply as in NCHW.
// So the pass holds both in the primitives' layout, as [N, C/B, H, W, B] tensors (Note [Channel
// blocks across a layer boundary] in core/cpu/channel_blocks.h), and three reorders of 3.2 MB
// leave the step. It does so when:
//  - the first layer is thin (its kernel writes V) and V is the whole of a contiguous storage,
//    written by it alone and not pinned;
//  - V's readers are exactly the second layer's fused forward and fused backward (as their
//    input: the same geometry and groups, on oneDNN's route) and, optionally, the first layer's
//    own backward through its pool, given window records (so it never reads V's values);
//  - oneDNN's three primitives of the second layer want the input and its gradient in one
//    dense channel-blocked layout whose blocks divide C (onednn::conv2d_input_channel_block).
// dV goes blocked too when the second layer's backward alone writes it and the first layer's
// backward alone reads it, whole. Exactness: the kernels write and read the same numbers in
// another order of addresses, and the primitives are the ones that ran on the reordered copies,
// so every result is the same, bit for bit (tests/compile).

namespace {

using ForwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Im2ColGeometry&, const Im2ColGeometry&, std::int64_t>;
using BackwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t>;
using FirstLayerBackwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                         const Tensor&, const Im2ColGeometry&, std::int64_t>;

Tensor blocked_like(const Tensor& t, std::int64_t block) {
  return empty({t.sizes()[0], t.sizes()[1] / block, t.sizes()[2], t.sizes()[3], block},
               TensorOptions(t.dtype()).device(t.device()));
}

}  // namespace

void propagate_channel_blocks(Graph& g) {
  if (!backends::onednn_is_available()) return;
  const std::map<const Storage*, StorageUses> uses = storage_uses(g);
  std::vector<StorageSwap> swaps;
  for (std::size_t p = 0; p < g.nodes.size(); ++p) {
    const auto* first = kernel_call<const ForwardCall>(g.nodes[p], KernelFamily::ConvForwardReluMaxPool);
    if (first == nullptr) continue;
    const auto& [values, indices, x, w1, b1, g1, pool1, groups1] = first->arguments();
    if (routes::cpu_conv2d(x.dtype(), w1.sizes(), groups1) != routes::Route::Thin || values.dim() != 4 ||
        !covers_storage(values)) {
      continue;
    }
    const StorageUses& v_uses = uses.at(storage_of(values));
    if (v_uses.pinned || v_uses.writes != std::vector<std::size_t>{p}) continue;
    const ForwardCall* second = nullptr;
    const BackwardCall* second_backward = nullptr;
    const FirstLayerBackwardCall* own_backward = nullptr;
    std::size_t second_backward_at = 0, own_backward_at = 0;
    bool readers_known = true;
    for (std::size_t r : v_uses.reads) {
      const Node& reader = g.nodes[r];
      if (const auto* f = kernel_call<const ForwardCall>(reader, KernelFamily::ConvForwardReluMaxPool);
          f != nullptr && second == nullptr && is_whole_value(std::get<2>(f->arguments()), values) &&
          handles_on(*reader.call, storage_of(values)) == 1) {
        second = f;
      } else if (const auto* b = kernel_call<const BackwardCall>(reader, KernelFamily::ConvBackwardThroughMaxPool);
                 b != nullptr && second_backward == nullptr && is_whole_value(std::get<7>(b->arguments()), values) &&
                 handles_on(*reader.call, storage_of(values)) == 1) {
        second_backward = b;
        second_backward_at = r;
      } else if (const auto* o =
                     kernel_call<const FirstLayerBackwardCall>(reader, KernelFamily::ConvBackwardWeightBiasThroughMaxPool);
                 o != nullptr && own_backward == nullptr && is_whole_value(std::get<4>(o->arguments()), values) &&
                 cpu::holds_pool_records(std::get<3>(o->arguments())) &&
                 storage_of(std::get<3>(o->arguments())) == storage_of(indices) &&
                 handles_on(*reader.call, storage_of(values)) == 1) {
        own_backward = o;
        own_backward_at = r;
      } else {
        readers_known = false;
      }
    }
    if (!readers_known || second == nullptr || second_backward == nullptr) continue;
    const auto& [values2, indices2, input2, w2, b2, g2, pool2, groups2] = second->arguments();
    const auto& [grad_input, gw2, gb2, gp2, i2, v2, w2b, input2b, g2b, groups2b] = second_backward->arguments();
    if (g2 != g2b || groups2 != groups2b || storage_of(w2) != storage_of(w2b) ||
        routes::cpu_conv2d(values.dtype(), w2.sizes(), groups2) != routes::Route::OneDnn) {
      continue;
    }
    const std::optional<std::int64_t> block =
        onednn::conv2d_input_channel_block(values.dtype(), values.sizes(), w2.sizes(), g2, groups2, b2.defined());
    if (!block) continue;
    StorageSwap activation{values, blocked_like(values, *block), {p}};
    for (std::size_t r : v_uses.reads) activation.nodes.push_back(r);
    swaps.push_back(std::move(activation));
    // The gradient, when it runs from the second layer's backward to the first layer's alone.
    if (own_backward == nullptr || !covers_storage(grad_input) || grad_input.sizes() != values.sizes()) {
      continue;
    }
    const StorageUses& d_uses = uses.at(storage_of(grad_input));
    if (d_uses.pinned || d_uses.writes != std::vector<std::size_t>{second_backward_at} ||
        d_uses.reads != std::vector<std::size_t>{own_backward_at} ||
        !is_whole_value(std::get<2>(own_backward->arguments()), grad_input)) {
      continue;
    }
    swaps.push_back({grad_input, blocked_like(grad_input, *block), {second_backward_at, own_backward_at}});
  }
  apply_swaps(g, swaps);
}

}  // namespace kiln::compiler
