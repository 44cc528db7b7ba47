// compile/passes/record_pool_windows.cpp — a fused convolution + relu + 2x2 max pool keeps one
// byte per window for its backward instead of Int64 indices and the pooled values. See Note
// [Records instead of indices].
#include <algorithm>
#include <array>

#include "compile/passes/fusion.h"
#include "core/cpu/pool_record.h"
#include "core/creation.h"

namespace kiln::compiler {

// Note [Records instead of indices]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After the fusion passes, train_cnn's layers are `V, I = conv2d.forward_relu_max_pool(x, w, b)`
// and, in the backward, one kernel that unpools dV through I and masks it on V (relu's
// backward) on its way into the convolution's gradients. I is Int64, eight bytes per window
// (6.4 MB for the first layer at batch 128), written once and read once, and V is read a
// second time only for the sign of each window's maximum. When the pool is 2x2 with stride 2,
// a byte says both (Note [A pool window in one byte] in core/cpu/pool_record.h), so the pass
// gives the forward a UInt8 record tensor in I's place and hands it to I's readers, whose
// kernels then read the record instead of I and V: 9.6 MB less memory traffic per step in the
// first layer, 4.8 MB in the second. It does so when:
//  - the forward's pool is 2x2, stride 2, no padding, every window whole, and I is Int64, the
//    whole of its storage, written by the forward alone and not pinned (no caller sees it);
//  - every reader of I is a kernel that takes records (a pool's backward with relu's, or a
//    convolution's backward through its pool) and reads V too, and nothing but the forward
//    writes V (the bit is V's sign when the forward made it, which is what the reader tests).
// Exactness: the record names each window's winner and relu's verdict on the stored maximum
// exactly as I and V did, so every gradient is the same sum, bit for bit (tests/compile).

namespace {

using ForwardCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Im2ColGeometry&, const Im2ColGeometry&, std::int64_t>;

bool takes_records(const Node& node) {
  constexpr std::array families{KernelFamily::MaxPoolBackwardRelu, KernelFamily::ConvBackwardThroughMaxPool,
                                KernelFamily::ConvBackwardWeightBiasThroughMaxPool};
  return node.kind == Node::Kind::Kernel &&
         std::find(families.begin(), families.end(), node.call->id().family) != families.end();
}

}  // namespace

void record_pool_windows(Graph& g) {
  const std::map<const Storage*, StorageUses> uses = storage_uses(g);
  std::vector<StorageSwap> swaps;
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    const auto* call = kernel_call<const ForwardCall>(g.nodes[n], KernelFamily::ConvForwardReluMaxPool);
    if (call == nullptr) continue;
    const auto& [values, indices, input, weight, bias, geometry, pool, groups] = call->arguments();
    if (indices.dtype() != kInt64 || !covers_storage(indices) || !cpu::pools_whole_2x2_windows(pool)) continue;
    const StorageUses& i_uses = uses.at(storage_of(indices));
    const StorageUses& v_uses = uses.at(storage_of(values));
    if (i_uses.pinned || i_uses.writes != std::vector<std::size_t>{n} || v_uses.writes != std::vector<std::size_t>{n}) {
      continue;
    }
    bool all_take_records = !i_uses.reads.empty();
    for (std::size_t r : i_uses.reads) {
      all_take_records = all_take_records && r > n && takes_records(g.nodes[r]) &&
                         handles_on(*g.nodes[r].call, storage_of(values)) > 0;
      for (const Tensor* t : std::as_const(*g.nodes[r].call).tensors()) {
        all_take_records = all_take_records && (storage_of(*t) != storage_of(indices) || is_whole_value(*t, indices));
      }
    }
    if (!all_take_records) continue;
    StorageSwap swap{indices, empty(indices.sizes(), TensorOptions(cpu::kPoolRecordDType).device(indices.device())),
                     {n}};
    swap.nodes.insert(swap.nodes.end(), i_uses.reads.begin(), i_uses.reads.end());
    swaps.push_back(std::move(swap));
  }
  apply_swaps(g, swaps);
}

}  // namespace kiln::compiler
