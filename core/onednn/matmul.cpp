// core/onednn/matmul.cpp — batched matrix products (the CPU's bmm kernel, under mm, matmul,
// addmm and linear) through oneDNN's matmul primitive: operands in their own strides, so a
// transposed weight (x @ w.t() in linear) or a broadcast batch (stride 0) is read in place;
// Float32, and BFloat16 with Float32 accumulation where the CPU has it. Small products and
// everything else stay on Eigen's GEMM (core/cpu/gemm.cpp); which is which is
// routes::cpu_matrix_product's (core/routes.h).
// Read next: core/onednn/conv.cpp.
#include <algorithm>

#include "core/cpu/cpu_kernels.h"
#include "core/onednn/kernels.h"
#include "core/onednn/runtime.h"
#include "core/routes.h"

namespace kiln::onednn {

namespace {

/// One operand [B, rows, cols] as oneDNN sees it: a stride-0 batch broadcasts as a batch of one.
/// With `whole_matrix_batch`, a batch of one gets the batch stride of a whole matrix, whatever
/// the view said (nothing steps along it): linear's w.t().unsqueeze(0) has batch stride K,
/// which makes the weight "cab" to oneDNN, and its matmul then takes gemm:jit instead of
/// brgemm (train_cnn's fc1 forward, 128x3136x128: 0.70 -> 0.53 ms in the step). Only for the
/// weights: a transposed activation (a weight gradient's x.t()) is faster on gemm:jit.
struct Operand {
  Shape sizes, strides;
};

Operand operand(const Tensor& t, bool whole_matrix_batch) {
  Operand o{t.sizes().vec(), t.strides().vec()};
  if (o.strides[0] == 0 || (whole_matrix_batch && o.sizes[0] == 1)) {
    o.sizes[0] = 1;
    o.strides[0] = std::max(o.sizes[1] * o.strides[1], o.sizes[2] * o.strides[2]);
  }
  return o;
}

// Note [Matrices of a batch that interleave]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Attention's heads are views: q = x.view(L, N·heads, head_dim).transpose(0, 1) keeps the
// heads inside the rows, so the matrices of the batch interleave in memory (batch stride
// head_dim, row stride N·heads·head_dim). oneDNN's matmul takes such an operand only on its
// gemm:jit route, one small product after another: train_charlm's scores Q·Kᵀ (64 products
// of 64x32x64, both operands interleaved) took 300 µs where the same values packed took
// 113 µs, and a packing copy takes 18 µs (Zen 4, 2 threads; in the whole compiled step, which
// has six such products per layer, 1.7-1.9 % turn by turn). So an operand whose batch
// stride is not its outermost is packed first, by the reorder Prepared puts in front of an
// argument whose wanted layout differs from its own, into a buffer a compiled step plans
// (Note [Planning on the meta device]). The values are the same; the sums run in the packed
// primitive's order.

/// Whether a batched operand's matrices interleave: its batch is not its outermost dim.
bool interleaves(const Operand& o) {
  return o.sizes[0] > 1 && (o.strides[0] < o.strides[1] * o.sizes[1] || o.strides[0] < o.strides[2] * o.sizes[2]);
}

/// The layout the primitive reads `o` in: its own, or where it interleaves, packed with its
/// matrices' own order kept (a transposed Kᵀ stays column-major: packing it row-major would be
/// a transpose, 4x the copy's time).
dnnl::memory::desc read_desc(const Operand& o, DType dtype) {
  if (!interleaves(o)) return plain_desc(o.sizes, o.strides, dtype);
  const std::int64_t rows = o.sizes[1], cols = o.sizes[2];
  const bool row_major = o.strides[2] <= o.strides[1];
  return plain_desc(o.sizes, row_major ? Shape{rows * cols, cols, 1} : Shape{rows * cols, 1, rows}, dtype);
}

/// The matmul primitive; with `bias` ([N], broadcast over rows and batches) added as each
/// output block is written (a compiled step's fused linear).
Prepared build(const Operand& a, const Operand& b, const Tensor& out, bool with_bias) {
  const dnnl::memory::desc src = plain_desc(a.sizes, a.strides, out.dtype());
  const dnnl::memory::desc weights = plain_desc(b.sizes, b.strides, out.dtype());
  const dnnl::memory::desc dst = plain_desc(out);
  const std::int64_t n = out.sizes()[2];
  const dnnl::memory::desc bias =
      with_bias ? plain_desc(Shape{1, 1, n}, Shape{n, n, 1}, out.dtype()) : dnnl::memory::desc();
  const dnnl::matmul::primitive_desc pd(
      dnnl::matmul::desc(read_desc(a, out.dtype()), read_desc(b, out.dtype()), bias, dst), attributes(), engine());
  std::vector<Argument> arguments{{DNNL_ARG_SRC, src, pd.src_desc()}, {DNNL_ARG_WEIGHTS, weights, pd.weights_desc()}};
  if (with_bias) arguments.push_back({DNNL_ARG_BIAS, bias, pd.bias_desc()});
  arguments.push_back({DNNL_ARG_DST, dst, pd.dst_desc(), /*is_output=*/true});
  return Prepared(dnnl::matmul(pd), pd, std::move(arguments));
}

bool run_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias = {}) {
  const Operand oa = operand(a, false), ob = operand(b, true);
  const std::int64_t op = bias.defined() ? 2 : 1;
  Key key = make_key({op, static_cast<std::int64_t>(out.dtype()), out.sizes()[0], out.sizes()[1],
                      out.sizes()[2], a.sizes()[2]});
  std::size_t used = extend_key(key, 6, oa.strides);
  used = extend_key(key, used, ob.strides);
  extend_key(key, used, {oa.sizes[0], ob.sizes[0]});
  const auto prepared = cached(key, [&] { return build(oa, ob, out, bias.defined()); });
  if (!prepared) return false;
  if (bias.defined()) {
    prepared->run({{DNNL_ARG_SRC, address_of(a)}, {DNNL_ARG_WEIGHTS, address_of(b)},
                   {DNNL_ARG_BIAS, address_of(bias)}, {DNNL_ARG_DST, address_of(out)}});
  } else {
    prepared->run({{DNNL_ARG_SRC, address_of(a)}, {DNNL_ARG_WEIGHTS, address_of(b)},
                   {DNNL_ARG_DST, address_of(out)}});
  }
  return true;
}


}  // namespace

void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (routes::cpu_matrix_product(out, a, b) == routes::Route::OneDnn) {
    // Larger products go to Eigen before oneDNN sees them (Note [oneDNN's 32-bit sizes]).
    if (fits_int32(out) && fits_int32(a) && fits_int32(b) && run_matmul(out, a, b)) return;
    count_fallback();
  }
  cpu::bmm_kernel(out, a, b);
}

void bmm_bias_kernel(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias, bool relu) {
  if (routes::cpu_matrix_product(out, a, b) == routes::Route::OneDnn && bias.dtype() == out.dtype() &&
      bias.is_contiguous()) {
    if (fits_int32(out) && fits_int32(a) && fits_int32(b) && run_matmul(out, a, b, bias)) {
      if (relu) relu_in_place(out);  // not oneDNN's post-op (Note [oneDNN's relu drops NaN])
      return;
    }
    count_fallback();
  }
  cpu::bmm_bias_kernel(out, a, b, bias, relu);
}

}  // namespace kiln::onednn
