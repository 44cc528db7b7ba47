// core/cpu/layer_norm.cpp — layer normalisation of each row, forward and backward, one pass
// over a row per step instead of a separate op per step.
//
// Note [One pass per layer-norm row]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Composed from ops, (x - mean) / sqrt(var + eps) * w + b
// makes about ten passes and as many temporaries forward, and twice that backward; a
// Transformer runs it twice per layer. Here a row stays in the cache from its mean to its
// output: the mean, the centred values and their squares' mean (two passes, as the composed
// var did, so a row far from zero loses nothing to cancellation), then the scaling. The sums
// are Kiln's cascade (Note [How Kiln sums]). With x̂ = (x - mean)·rstd and a = dy·w, the
// backward is
//   dx = rstd · (a - mean(a) - x̂ · mean(a · x̂))   per row,
//   dw = Σ_rows dy · x̂,   db = Σ_rows dy           per column,
// the column sums in Kiln's cascade: the row pass adds dy · x̂ over each block of kSumBlock
// rows in float, as the cascade's block tier would, and the blocks' sums go through its double
// levels after, so their order, and their result, do not depend on the thread count. That is
// bit for bit the column sum of an [M, N] buffer of the products, which the kernel used to
// write and read back: 95-98 -> 71-73 µs for train_charlm's [1024, 128] (Zen 4, 2 threads).
//
// Note [Rows in flight]
// ~~~~~~~~~~~~~~~~~~~~~
// A row of 128 floats is a few dozen vector instructions, and the forward's steps follow one
// another: the mean's sum, the centring, the squares' sum, a division and a square root, the
// scaling. Row by row, each waited for the one before (93 µs for train_charlm's [1024, 128] on
// one Zen 4 thread, ~330 cycles a row). The forward takes kRowsInFlight rows through each step
// before the next, so their independent chains overlap: 71 µs (1.3x; 2 threads 48-55 -> 37-46
// µs). Each row's operations and their order are unchanged, so are its bits. The backward's
// steps are already independent within a row (its two sums), and grouping gained nothing there.
// Read next: autograd/functions/layer_norm.cpp (NativeLayerNormBackward0).
#include <Eigen/Core>

#include <cmath>

#include "core/cpu/cascade_sum.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/cpu/rows.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {

using LayerNormTypes = TypeList<float, double>;

/// Rows taken a step at a time (Note [Rows in flight]).
constexpr std::int64_t kRowsInFlight = 4;

/// Σ over rows of a contiguous [rows, n] block, column by column (lanes of Kiln's cascade).
template <class T>
void sum_columns(const T* p, std::int64_t rows, std::int64_t n, T* out) {
  constexpr std::int64_t L = kSumLanes<T>;
  const std::int64_t chunks = (n + L - 1) / L;
  parallel_for(0, chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const std::int64_t j = c * L, width = std::min(L, n - j);
      WideSum sums[L] = {};
      sum_rows(p + j, rows, n, width, sums);
      for (std::int64_t k = 0; k < width; ++k) out[j + k] = static_cast<T>(sums[k]);
    }
  });
}

/// The columns of [blocks, n] block sums through the cascade's double levels, as sum_columns
/// passes its own blocks' sums.
template <class T>
void sum_block_sums(const T* p, std::int64_t blocks, std::int64_t n, T* out) {
  constexpr std::int64_t L = kSumLanes<T>;
  for (std::int64_t j = 0; j < n; j += L) {
    const std::int64_t width = std::min(L, n - j);
    detail::SumCascade<L> cascade;
    for (std::int64_t b = 0; b < blocks; ++b) cascade.add_block(p + b * n + j, width);
    WideSum sums[L];
    cascade.template finish<false>(width, sums);
    for (std::int64_t k = 0; k < width; ++k) out[j + k] = static_cast<T>(sums[k]);
  }
}

}  // namespace

void layer_norm_forward_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                               const Tensor& weight, const Tensor& bias, double eps) {
  const std::int64_t rows = mean.numel(), n = rows > 0 ? input.numel() / rows : 0;
  if (rows == 0 || n == 0) return;
  dispatch_dtype<LayerNormTypes>(input.dtype(), "layer_norm_cpu", [&]<typename T>() {
    const T* const x = input.data_ptr<T>();
    T* const y = out.data_ptr<T>();
    T* const mean_p = mean.data_ptr<T>();
    T* const rstd_p = rstd.data_ptr<T>();
    const T* const w = weight.defined() ? weight.data_ptr<T>() : nullptr;
    const T* const b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    parallel_for(0, rows, rows_per_task(n), [&](std::int64_t begin, std::int64_t end) {
      auto& squares = scratch_row<T>(kRowsInFlight * n);
      for (std::int64_t first = begin; first < end; first += kRowsInFlight) {
        const std::int64_t group = std::min(kRowsInFlight, end - first);
        T m[kRowsInFlight], s[kRowsInFlight];
        for (std::int64_t i = 0; i < group; ++i) {
          m[i] = static_cast<T>(sum_contiguous(x + (first + i) * n, n) / static_cast<double>(n));
        }
        for (std::int64_t i = 0; i < group; ++i) {
          Row<T> o(y + (first + i) * n, n), square(squares.data() + i * n, n);
          o = ConstRow<T>(x + (first + i) * n, n) - m[i];
          square = o.square();
        }
        for (std::int64_t i = 0; i < group; ++i) {
          const double variance = sum_contiguous(squares.data() + i * n, n) / static_cast<double>(n);
          s[i] = static_cast<T>(1.0 / std::sqrt(variance + eps));
        }
        for (std::int64_t i = 0; i < group; ++i) {
          Row<T> o(y + (first + i) * n, n);
          o *= s[i];
          if (w) o *= ConstRow<T>(w, n);
          if (b) o += ConstRow<T>(b, n);
          mean_p[first + i] = m[i];
          rstd_p[first + i] = s[i];
        }
      }
    });
  });
}

void layer_norm_backward_kernel(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                const Tensor& grad_output, const Tensor& input, const Tensor& mean,
                                const Tensor& rstd, const Tensor& weight) {
  const std::int64_t rows = mean.numel(), n = rows > 0 ? input.numel() / rows : 0;
  if (n == 0) return;
  dispatch_dtype<LayerNormTypes>(input.dtype(), "layer_norm_backward_cpu", [&]<typename T>() {
    const T* const x = input.data_ptr<T>();
    const T* const dy = grad_output.data_ptr<T>();
    const T* const mean_p = mean.data_ptr<T>();
    const T* const rstd_p = rstd.data_ptr<T>();
    const T* const w = weight.defined() ? weight.data_ptr<T>() : nullptr;
    T* const dx = grad_input.defined() ? grad_input.data_ptr<T>() : nullptr;
    // Σ dy · x̂ over each block of kSumBlock rows (the cascade's block tier), for the weight's
    // gradient.
    const std::int64_t blocks = (rows + kSumBlock - 1) / kSumBlock;
    Eigen::Array<T, Eigen::Dynamic, 1> block_sums;
    if (grad_weight.defined()) block_sums.setZero(blocks * n);
    if (dx || grad_weight.defined()) {
      const std::int64_t blocks_per_task = std::max<std::int64_t>(1, rows_per_task(n) / kSumBlock);
      parallel_for(0, blocks, blocks_per_task, [&](std::int64_t first_block, std::int64_t end_block) {
        auto& terms = scratch_row<T>(3 * n);
        Row<T> xhat(terms.data(), n), a(terms.data() + n, n), products(terms.data() + 2 * n, n);
        for (std::int64_t r = first_block * kSumBlock; r < std::min(rows, end_block * kSumBlock); ++r) {
          const ConstRow<T> g(dy + r * n, n);
          xhat = (ConstRow<T>(x + r * n, n) - mean_p[r]) * rstd_p[r];
          if (grad_weight.defined()) {
            // Rounded before it is added, as the block tier adds stored terms (a fused
            // multiply-add, which the compiler may make of `+= g * xhat`, rounds once).
            products = g * xhat;
            Row<T>(block_sums.data() + r / kSumBlock * n, n) += products;
          }
          if (!dx) continue;
          if (w) a = g * ConstRow<T>(w, n);
          const ConstRow<T> scaled_dy(w ? a.data() : g.data(), n);  // a = dy when there is no weight
          products = scaled_dy * xhat;
          const T mean_a = static_cast<T>(sum_contiguous(scaled_dy.data(), n) / static_cast<double>(n));
          const T mean_ax = static_cast<T>(sum_contiguous(products.data(), n) / static_cast<double>(n));
          Row<T>(dx + r * n, n) = rstd_p[r] * (scaled_dy - mean_a - xhat * mean_ax);
        }
      });
    }
    if (grad_weight.defined()) sum_block_sums(block_sums.data(), blocks, n, grad_weight.data_ptr<T>());
    if (grad_bias.defined()) sum_columns(dy, rows, n, grad_bias.data_ptr<T>());
  });
}

}  // namespace kiln::cpu
