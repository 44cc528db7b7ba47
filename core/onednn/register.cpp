// core/onednn/register.cpp — what oneDNN takes over in the CPU's table, and which op
// families then default to the library route (backends::OpFamily).
// Read next: core/onednn/runtime.h.
#include "core/onednn/kernels.h"
#include "core/onednn/onednn.h"

namespace kiln::onednn {

// Note [What the CPU's library route covers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Convolution and matrix products: oneDNN's kernels run them at 80-98 % of the FMA peak, where
// unfold + Eigen's GEMM reached 30-60 % (bench_training). Pooling and batch norm stay on Kiln's
// own kernels, measured before deciding (2-core Zen 1, AVX2, [128, 32, 28, 28], batch norm
// [128, 8, 28, 28]):
//  - oneDNN's pooling on plain NCHW (simple_nchw) took 18-22 ms forward and 10 ms backward for a
//    2x2 max pool that Kiln's kernel does in 2.9 ms; its blocked kernel (1.2 / 1.9 ms) would need
//    a 12.8 MB reorder each way, which costs more than it saves. A compiled step needs neither
//    reorder: Kiln's pool reads the convolution's blocked output where it lies (Note [A
//    convolution's blocked output pooled where it lies] in core/cpu/pool.cpp).
//  - oneDNN's batch norm adds its statistics in float: the batch mean came out with 1.05e-6
//    relative error on data of mean 50, std 0.5, where Kiln's sums give ~1e-8 and PyTorch's
//    double accumulators the same (Note [How Kiln sums]). The numerics bar comes first.
// Their op kernels are still Kiln's reference kernels, reachable with backends::OpKernelsGuard.

void register_kernels(BackendKernels& t) {
  t.bmm = &bmm_kernel;
  t.bmm_bias = &bmm_bias_kernel;
  t.prefers_op_kernels[static_cast<std::size_t>(backends::OpFamily::Convolution)] = true;
  t.prefers_op_kernels[static_cast<std::size_t>(backends::OpFamily::MatrixProduct)] = true;
}

}  // namespace kiln::onednn
