// compile/passes/fuse_conv_bias_backward.cpp — a convolution's weight gradient and its bias
// gradient, two reads of the output's gradient, become one kernel that reads it once. See
// Note [The bias gradient inside the weight gradient].
#include <algorithm>

#include "compile/passes/fusion.h"

namespace kiln::compiler {

// Note [The bias gradient inside the weight gradient]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Conv2d's backward makes the weight gradient with conv2d.backward_weight(dW, dY, X) and the
// bias gradient with reduce.sum(dY) over N, H and W: two passes over dY, which for train_cnn's
// first layer at batch 128 is 12.8 MB and no longer in cache by the second. oneDNN's weight
// gradient primitive can produce diff_bias as it goes (ConvKernels::backward_weight_bias), so
// the pass makes one call of the pair when:
//  - the sum reads the whole of the tensor the weight gradient read as dY, over dims [0, 2, 3]
//    with divisor 1, into a contiguous [1, O, 1, 1] of dY's dtype;
//  - nothing between the two writes dY, and nothing between them touches the output that now
//    moves to the first one's place.
// Exactness: this pass changes a floating-point reduction's order. oneDNN adds each channel's
// N·H·W values in its own order, in float, where Kiln's sum is a cascade (Note [How Kiln
// sums]); PyTorch's CPU convolution takes its bias gradient from the same oneDNN primitive. So
// in Float32 on the oneDNN route the bias gradient differs from the eager one in its last bits
// and is less accurate: on 1,922 values of mean 3 per channel (the test in tests/compile, which
// bounds the error against a Float64 sum), 13 units in the last place off where Kiln's sum is
// within half of one. Leave the pass out (KILN_COMPILE_PASSES) to keep eager's bits. A
// thin first layer (Kiln's direct kernel, core/cpu/conv_thin.cpp) adds each plane of dY as it
// reads it for the weight: each row in float lanes, the rows in double. Where
// neither runs (Float64, the Eigen route) the fused kernel is the pair itself, bit for bit.

namespace {

using WeightCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t>;
using SumCall = TypedCall<const Tensor&, const Tensor&, IntArrayRef, double>;
using FusedCall =
    TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&, std::int64_t>;

/// The node that sums `grad_output` into a bias gradient of `channels` values, if any.
std::optional<std::size_t> bias_sum_of(const Graph& g, const StorageUses& grad_output_uses,
                                       const Tensor& grad_output, std::int64_t channels) {
  for (std::size_t m : grad_output_uses.reads) {
    const Node& node = g.nodes[m];
    if (node.kind != Node::Kind::Kernel || !node.call->id().is(ReduceOp::Sum)) continue;
    const auto* sum = dynamic_cast<const SumCall*>(node.call.get());
    if (sum == nullptr) continue;
    const auto& [out, in, dims, divisor] = sum->arguments();
    const Shape bias_shape{1, channels, 1, 1};
    if (same_view(in, grad_output) && dims == std::vector<std::int64_t>{0, 2, 3} && divisor == 1.0 &&
        out.sizes() == bias_shape && out.is_contiguous() && out.dtype() == grad_output.dtype()) {
      return m;
    }
  }
  return std::nullopt;
}

}  // namespace

void fuse_conv_bias_backward(Graph& g) {
  const ConvKernels::BackwardWeightBias fused = registered_kernels(DeviceType::CPU).conv2d.backward_weight_bias;
  if (fused == nullptr) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  fuse_each<WeightCall>(g, KernelFamily::ConvBackwardWeight, [&](std::size_t n, WeightCall& call,
                                                                 std::vector<bool>& removed) {
    const auto& [grad_weight, grad_output, input, geometry, groups] = call.arguments();
    if (grad_output.dim() != 4) return;
    const StorageUses& dy = uses[storage_of(grad_output)];
    const std::optional<std::size_t> m = bias_sum_of(g, dy, grad_output, grad_weight.sizes()[0]);
    if (!m || removed[*m]) return;
    const auto& [grad_bias, summed, dims, divisor] = dynamic_cast<const SumCall&>(*g.nodes[*m].call).arguments();
    const std::size_t first = std::min(n, *m), last = std::max(n, *m);
    if (written_between(dy, first, last)) return;
    // Whichever half moves up must find its inputs unchanged and its output untouched.
    if (*m > n && touched_between(uses[storage_of(grad_bias)], first, last)) return;
    if (*m < n && (written_between(uses[storage_of(input)], first, last) ||
                   touched_between(uses[storage_of(grad_weight)], first, last))) {
      return;
    }
    auto replacement = std::make_unique<FusedCall>(KernelId{KernelFamily::ConvBackwardWeightBias, -1}, fused,
                                                   grad_weight, grad_bias, grad_output, input, geometry, groups);
    Node& kept = g.nodes[first];
    kept.call = std::move(replacement);
    kept.made_by = "fuse_conv_bias_backward";
    removed[last] = true;
  });
}

}  // namespace kiln::compiler
