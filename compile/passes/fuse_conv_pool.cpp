// compile/passes/fuse_conv_pool.cpp — a convolution (with its relu) and the max pool after it
// become one kernel: a thin first layer pools each pair of rows as it makes them, a oneDNN
// layer pools its blocked output without reordering it. See Note [A thin convolution pooled as
// it is made].
#include "compile/passes/fusion.h"
#include "core/backends.h"
#include "core/routes.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/pool_record.h"

namespace kiln::compiler {

// Note [A thin convolution pooled as it is made]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// After fuse_conv_relu, train_cnn's first layer is `A = conv2d.forward_relu(x, w, b)` (12.8 MB
// at batch 128) and `V, I = max_pool2d(A)`: the pool reads all of A back from memory, and
// once fuse_pool_relu_backward has run nothing else reads A (relu's backward then goes through
// the pool's values, Note [Relu's backward through a max pool]; the weight gradient reads x).
// Kiln's thin kernel makes its output row by row in registers, so it can pool each pair of rows
// as soon as both exist (ConvKernels::forward_relu_max_pool) and A is never written. The pass
// fuses the two when:
//  - the convolution is thin (core/cpu/conv_thin.cpp makes its rows) and the pool is 2x2 with
//    stride 2, no padding or dilation (pools_whole_2x2_windows); or the convolution is on
//    oneDNN's route, whose primitive writes A in channel blocks: there the fused kernel keeps A
//    in that layout, in scratch memory, and pools it where it lies instead of reordering it to
//    NCHW for the pool to read back (Note [A convolution's blocked output pooled where it lies]
//    in core/cpu/pool.cpp; a layout or shape oneDNN does not serve gets the pair, A in scratch);
//  - A is written by the convolution alone, read by the pool alone, whole, and not pinned;
//  - nothing between the two touches V or I, whose writes move up to the convolution's place.
// Exactness: each output is the same sum, relu'd and rounded to the dtype as it would have been
// stored; each window's maximum and index follow max_pool2d_kernel's rule in its order (each
// row's two columns, then the rows; the first maximum and the first NaN win), so V and I are
// the pair's, bit for bit (tests/compile checks NaN, ties and BFloat16).

namespace {

using ConvCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&,
                           std::int64_t>;
using PoolCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Im2ColGeometry&>;
using FusedCall = TypedCall<const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Im2ColGeometry&, const Im2ColGeometry&, std::int64_t>;

}  // namespace

void fuse_conv_pool(Graph& g) {
  const ConvKernels::ForwardReluMaxPool fused = registered_kernels(DeviceType::CPU).conv2d.forward_relu_max_pool;
  if (fused == nullptr) return;
  std::map<const Storage*, StorageUses> uses = storage_uses(g);
  fuse_each<const ConvCall>(g, KernelFamily::ConvForwardRelu, [&](std::size_t n, const ConvCall& call,
                                                                  std::vector<bool>& removed) {
    const auto& [out, input, weight, bias, geometry, groups] = call.arguments();
    const bool thin = routes::cpu_conv2d(input.dtype(), weight.sizes(), groups) == routes::Route::Thin;
    if (!(thin || backends::onednn_is_available()) || !covers_storage(out)) return;
    const std::optional<std::size_t> m = only_reader(uses[storage_of(out)]);
    if (!m || *m <= n || removed[*m]) return;
    const auto* pool_call = kernel_call<const PoolCall>(g.nodes[*m], KernelFamily::MaxPool);
    if (pool_call == nullptr) return;
    const auto& [values, indices, pooled, pool_geometry] = pool_call->arguments();
    if (!pooled.is_same(out) && !(storage_of(pooled) == storage_of(out) && covers_storage(pooled) &&
                                  pooled.sizes() == out.sizes())) {
      return;
    }
    if ((thin && !cpu::pools_whole_2x2_windows(pool_geometry)) || touched_between(uses[storage_of(values)], n, *m) ||
        touched_between(uses[storage_of(indices)], n, *m)) {
      return;
    }
    auto replacement = std::make_unique<FusedCall>(KernelId{KernelFamily::ConvForwardReluMaxPool, -1}, fused, values,
                                                   indices, input, weight, bias, geometry, pool_geometry, groups);
    Node& conv = g.nodes[n];
    conv.call = std::move(replacement);
    conv.made_by = "fuse_conv_pool";
    removed[*m] = true;
  });
}

}  // namespace kiln::compiler
