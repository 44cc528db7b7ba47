// core/cpu/gemm.cpp — batched matrix multiply on the CPU through Eigen's GEMM.
// Operands are mapped in place whenever their layout is row-major or column-major with any
// leading stride, so a transposed weight (x @ w.t() in linear) is never copied; only layouts
// Eigen cannot describe (both strides non-unit, or a broadcast row) are packed first.
// Half types are widened to float, multiplied, and rounded once.
// Read next: core/cpu/index.cpp.
#include <optional>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/dispatch.h"
#include "core/kernels.h"
#include "core/ops/allocate.h"

namespace kiln::cpu {

namespace {

/// How a (rows x cols) strided matrix maps onto Eigen: storage order and leading stride.
struct Layout {
  bool row_major;
  std::int64_t outer;
};

std::optional<Layout> layout_of(std::int64_t rows, std::int64_t cols, std::int64_t s_row,
                                std::int64_t s_col) {
  if ((cols == 1 || s_col == 1) && (rows == 1 || s_row >= cols)) {
    return Layout{true, rows == 1 ? cols : s_row};
  }
  if ((rows == 1 || s_row == 1) && (cols == 1 || s_col >= rows)) {
    return Layout{false, cols == 1 ? rows : s_col};
  }
  return std::nullopt;
}

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

template <class T, class Fn>
void with_map(const T* p, std::int64_t rows, std::int64_t cols, Layout l, const Fn& fn) {
  using Stride = Eigen::OuterStride<>;
  if (l.row_major) {
    fn(Eigen::Map<const RowMajor<T>, Eigen::Unaligned, Stride>(p, rows, cols, Stride(l.outer)));
  } else {
    fn(Eigen::Map<const ColMajor<T>, Eigen::Unaligned, Stride>(p, rows, cols, Stride(l.outer)));
  }
}

/// c[M, N] (row-major, leading stride ldc) = a[M, K] @ b[K, N], on the calling thread.
template <class T>
void gemm(T* c, std::int64_t ldc, const T* a, Layout la, const T* b, Layout lb, std::int64_t M, std::int64_t K,
          std::int64_t N) {
  Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>> C(c, M, N, Eigen::OuterStride<>(ldc));
  if (K == 0) {
    C.setZero();
    return;
  }
  with_map(a, M, K, la, [&](const auto& A) {
    with_map(b, K, N, lb, [&](const auto& B) { C.noalias() = A * B; });
  });
}

/// Where row `i` (or column `j`) of a mapped matrix starts.
template <class T>
const T* row_at(const T* p, Layout l, std::int64_t i) { return p + (l.row_major ? i * l.outer : i); }
template <class T>
const T* col_at(const T* p, Layout l, std::int64_t j) { return p + (l.row_major ? j : j * l.outer); }

// Note [Splitting a GEMM across threads]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Eigen's own parallel GEMM packs the whole of one operand into a buffer it allocates on
// every call. For convolution's shapes that operand is the unfolded input (144 x 100,352
// floats for the examples' second layer at batch 128: 58 MB), so each call page-faults in
// 58 MB of fresh memory and the product ran at 7 GFLOP/s. Instead Kiln splits the larger
// output dimension into one slab per thread and lets each thread run Eigen's single-threaded
// GEMM (cache-sized buffers) on its slab. Measured on this machine class, 2 threads: the
// conv shape above 134 ms -> 9.5 ms; every other shape in the CNN and MLP steps 5-40% faster
// (tests/bench/bench_matmul, bench_training).
template <class T>
void gemm_split(T* c, const T* a, Layout la, const T* b, Layout lb, std::int64_t M, std::int64_t K,
                std::int64_t N) {
  // Slabs are multiples of 16 rows/columns: whole AVX-512 vectors of floats.
  constexpr std::int64_t kAlign = 16;
  if (N >= M) {
    parallel_for(0, (N + kAlign - 1) / kAlign, 1, [&](std::int64_t b0, std::int64_t e0) {
      const std::int64_t j0 = b0 * kAlign, j1 = std::min(N, e0 * kAlign);
      gemm(c + j0, N, a, la, col_at(b, lb, j0), lb, M, K, j1 - j0);
    });
  } else {
    parallel_for(0, (M + kAlign - 1) / kAlign, 1, [&](std::int64_t b0, std::int64_t e0) {
      const std::int64_t i0 = b0 * kAlign, i1 = std::min(M, e0 * kAlign);
      gemm(c + i0 * N, N, row_at(a, la, i0), la, b, lb, i1 - i0, K, N);
    });
  }
}

/// A copy of `t` that Eigen can map (contiguous), when its own layout cannot be mapped.
Tensor mappable(const Tensor& t, DType dtype) {
  const auto M = t.sizes()[1], K = t.sizes()[2];
  if (t.dtype() == dtype && layout_of(M, K, t.strides()[1], t.strides()[2])) return t;
  Tensor packed = ops::empty_output(t.sizes(), dtype, t.device(), "bmm_cpu");
  if (!t.is_meta()) copy_kernel(packed, t);
  return packed;
}

template <class T>
void bmm_native(const Tensor& out, const Tensor& a, const Tensor& b) {
  const std::int64_t batch = out.sizes()[0], M = a.sizes()[1], K = a.sizes()[2],
                     N = b.sizes()[2];
  const Layout la = *layout_of(M, K, a.strides()[1], a.strides()[2]);
  const Layout lb = *layout_of(K, N, b.strides()[1], b.strides()[2]);
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* pc = out.data_ptr<T>();
  const std::int64_t sa = a.strides()[0], sb = b.strides()[0];
  // Many small products: one per thread, each single-threaded inside (Eigen sees the active
  // OpenMP region). Few large ones: one after another, each split across the threads (Note
  // [Splitting a GEMM across threads]).
  if (batch > 1 && M * N * K < 128 * 128 * 128) {
    parallel_for(0, batch, 1, [&](std::int64_t b0, std::int64_t e0) {
      for (std::int64_t i = b0; i < e0; ++i) gemm(pc + i * M * N, N, pa + i * sa, la, pb + i * sb, lb, M, K, N);
    });
  } else {
    for (std::int64_t i = 0; i < batch; ++i) gemm_split(pc + i * M * N, pa + i * sa, la, pb + i * sb, lb, M, K, N);
  }
}

}  // namespace

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  // Eigen's own parallel GEMM busy-waits on its peers, and a product Kiln did not split (one
  // slab) would take it: Kiln does all the splitting (Note [Splitting a GEMM across threads]).
  static const bool eigen_single_threaded = (Eigen::setNbThreads(1), true);
  (void)eigen_single_threaded;
  dispatch_dtype<GemmTypes>(out.dtype(), "addmm_impl_cpu_", [&]<typename T>() {
    // On the meta device (a planned step) only the scratch copies are made.
    const bool dry = out.is_meta();
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      const Tensor ma = mappable(a, out.dtype()), mb = mappable(b, out.dtype());
      if (!dry) bmm_native<T>(out, ma, mb);
    } else {
      // Half types: widen to float once, multiply in float, round once.
      Tensor out_f = ops::empty_output(out.sizes(), kFloat32, out.device(), "bmm_cpu");
      const Tensor ma = mappable(a, kFloat32), mb = mappable(b, kFloat32);
      if (!dry) {
        bmm_native<float>(out_f, ma, mb);
        copy_kernel(out, out_f);
      }
    }
  });
}

// The product, then the bias and relu as separate passes: the reference for oneDNN's fused
// route (core/onednn/matmul.cpp).
void bmm_bias_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias, bool relu) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  cpu.bmm(out, a, b);
  cpu.binary[static_cast<std::size_t>(BinaryOp::Add)](out, out, bias);
  if (relu) cpu.unary[static_cast<std::size_t>(UnaryOp::Relu)](out, out);
}

}  // namespace kiln::cpu
