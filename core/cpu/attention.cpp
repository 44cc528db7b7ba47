// core/cpu/attention.cpp — scaled dot-product attention's forward and backward, one head at a
// time with everything the head makes in cache: the kernels fuse_attention puts in a compiled
// step in place of the products, scale, mask and softmax that eager attention runs one after
// the other (Note [Attention a head at a time]).
// Read next: compile/passes/fuse_attention.cpp (where these replace the eager calls),
// core/cpu/softmax_row.h.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu/block_lanes.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/cpu/softmax_row.h"
#include "core/cpu/transpose_tiles.h"
#include "core/dispatch.h"

namespace kiln::cpu {

// Note [Attention a head at a time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Eager attention (autograd/functions/attention.cpp) is five kernels, each over every head:
// S = Q Kᵀ, S·scale + M, P = softmax(S), O = P V, and in the backward five products and the
// softmax's backward. In train_charlm's step (64 heads of 64 x 64 scores, head_dim 32) each of
// them is small work spread over memory: the scores make a megabyte that is written and read
// back three times, and oneDNN's batched product cannot read heads that interleave in the rows
// (Note [Matrices of a batch that interleave] in core/onednn/matmul.cpp), so every product first
// packs its operands. On a 2-core Zen 4 the step's attention took 3.0 ms of 18.
//
// Here a thread takes one head at a time and makes everything the head needs while it is in
// its cache: Kᵀ packed (D x S, 8 KB for that head), the scores row by row, their scale, mask and
// softmax (softmax_row, the softmax kernel's own code), P stored for the backward, then O. The
// backward likewise: dV = Pᵀ dO, dP = dO Vᵀ, dS = softmax's backward (softmax_backward_row),
// dQ = dS K · scale and dK = dSᵀ Q · scale, with dP and dS never leaving the thread's scratch.
// Q, K, V, dO and the gradients are read and written where they lie, any row stride.
//
// All of it is one product micro-kernel (product() below): R rows of output, C vectors wide,
// each sum over k one FMA per step in k's order, with a's element broadcast and b's row as
// vectors. The sums are taken in the order the eager products take theirs (k ascending, one
// accumulator), but oneDNN's kernels may block k differently, so the products, and everything
// after them, can differ in the last bits from eager's: the pass's Note says so and
// tests/compile/test_fuse_attention.cpp holds them to Float64.

// Note [What the mask hides is not computed]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under a causal mask half of every head's scores are -inf: their probabilities are exactly 0,
// and so are their terms in P V, their dS (P times anything finite) and those terms in dS K,
// dSᵀ Q and Pᵀ dO. Each head first finds, row by row, where its last live value is (the last
// mask value that is not -inf forward, the last probability that is not 0 backward, a whole
// vector at a time), and each product tile then sums and stores only that much: the scores'
// columns and dP's up to the tile's last live column, P V's and dS K's k up to it, and Pᵀ dO's
// and dSᵀ Q's k from the first row that reaches the tile's column. The softmax and its
// backward take the exp and the products over the live part only and write zeros past it, and
// still sum over the whole row in its order, so every value is the one the whole computation
// gives: terms left out are zeros, and a zero added changes no sum. (Two differences, both
// where eager's result is not a number anyway: a -inf score whose product is +inf or NaN, and
// an inf or NaN in V or dO that a zero probability would have multiplied, make NaNs in eager's
// result and are not read here. A row that is all -inf is computed whole, NaNs and all.) The
// mask need not be causal: any mask, or any probability that rounds to 0, trims the rows it ends.
// On train_charlm's heads (64 x 64, causal) this made the forward about 10 % and the backward
// 20 % faster by themselves, the compiled step 1 % (2-core Zen 4, alternating in one process),
// with the same bits after 20 steps.

// Note [The next head on its way]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// In a compiled step a head's operands come from memory, not cache: the projections wrote Q, K
// and V some kernels earlier, and the backward reads P and dO a whole forward and half a
// backward after they were written, so each head waits on its loads. train_charlm's heads (8 x 4
// of 128 x 128, 2 threads, 2-core Zen 4), the kernels alone: forward 337 µs and backward 517 µs
// warm, 582 and 866 with the caches flushed between calls. So while a thread works through one
// head's softmax rows it asks, row for row, for the same rows of the next head it will take
// (Q, K, V, dO and P to read; O, P, dQ, dK and dV to write): flushed, 391-400 and 642-663 µs.
// In the compiled step (profiler, steps 2-4, three runs of each build in turn, the quiet ones)
// the two forward calls took 0.74-0.81 ms a step instead of 0.95, the two backward 1.30-1.49
// instead of 1.62-1.66. Prefetches are hints: the bits are the same.

namespace {

/// A vector of 64 bytes: 16 floats or 8 doubles (AVX-512's register; two AVX2 ones elsewhere).
template <class T>
constexpr std::int64_t kWidth = 64 / sizeof(T);
template <class T>
using Lanes = typename VectorOf<T, static_cast<int>(kWidth<T>)>::type;

template <class T>
Lanes<T> load(const T* p, std::int64_t n) {
  Lanes<T> v = {};
  std::memcpy(&v, p, static_cast<std::size_t>(n) * sizeof(T));
  return v;
}
template <class T>
void store(T* p, const Lanes<T>& v, std::int64_t n) {
  std::memcpy(p, &v, static_cast<std::size_t>(n) * sizeof(T));
}

/// One operand of a product: element (r, k) at data[r * row + k * step].
template <class T>
struct Operand {
  const T* data;
  std::int64_t row, step;
};

/// What a product does with each rounded sum before it stores it: times `multiplier`, then plus
/// the element of `addend` (when not null) at the output's place, two roundings as two ops.
template <class T>
struct Epilogue {
  T multiplier = T(1);
  const T* addend = nullptr;
  std::int64_t addend_row = 0;
};

/// The part of a product that a tile of output rows [first, last) needs: the sums over k in
/// [k_begin, k_end) and the columns [0, columns). What lies outside is a product of zeros (a
/// probability the mask made zero, or its gradient), so leaving it out changes no sum
/// (Note [What the mask hides is not computed]).
struct TileExtent {
  static constexpr std::int64_t kAll = std::numeric_limits<std::int64_t>::max();
  std::int64_t k_begin = 0, k_end = kAll, columns = kAll;
};
/// The whole product, for every tile.
struct WholeTiles {
  TileExtent operator()(std::int64_t /*first*/, std::int64_t /*last*/) const { return {}; }
};

/// out[r, 0 .. C vectors) = Σ_k a(r, k) b[k, ..] over k in [k_begin, k_end), through the
/// epilogue, for R rows (row r of a at a_rows[r], of the addend at add_rows[r]); with Tail the
/// last vector holds `tail` values.
template <class T, int R, int C, bool Tail>
void product_tile(const T* const (&a_rows)[R], std::int64_t a_step, const T* b, std::int64_t b_row,
                  std::int64_t k_begin, std::int64_t k_end, T* const (&out_rows)[R], const T* const (&add_rows)[R],
                  std::int64_t tail, T multiplier) {
  constexpr std::int64_t W = kWidth<T>;
  Lanes<T> acc[R][C] = {};
  for (std::int64_t k = k_begin; k < k_end; ++k) {
    const T* const bk = b + k * b_row;
    Lanes<T> bv[C];
    for (int c = 0; c < C; ++c) {
      if (Tail && c + 1 == C) bv[c] = load(bk + c * W, tail);
      else std::memcpy(&bv[c], bk + c * W, sizeof(bv[c]));
    }
    for (int r = 0; r < R; ++r) {
      const T s = a_rows[r][k * a_step];
      for (int c = 0; c < C; ++c) acc[r][c] += s * bv[c];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      Lanes<T> value = acc[r][c] * multiplier;
      if (add_rows[r] != nullptr) value = value + (Tail && c + 1 == C ? load(add_rows[r] + c * W, tail) : load(add_rows[r] + c * W, W));
      if (Tail && c + 1 == C) store(out_rows[r] + c * W, value, tail);
      else std::memcpy(out_rows[r] + c * W, &value, sizeof(value));
    }
  }
}

/// product_tile over the first `vectors` (≤ C) vectors of the tile's columns.
template <class T, int R, int C>
void narrowed_tile(std::int64_t vectors, const T* const (&a_rows)[R], std::int64_t a_step, const T* b,
                   std::int64_t b_row, std::int64_t k_begin, std::int64_t k_end, T* const (&out_rows)[R],
                   const T* const (&add_rows)[R], std::int64_t tail, T multiplier) {
  if constexpr (C > 1) {
    if (vectors < C) {
      narrowed_tile<T, R, C - 1>(vectors, a_rows, a_step, b, b_row, k_begin, k_end, out_rows, add_rows, tail,
                                 multiplier);
      return;
    }
  }
  if (tail == kWidth<T>) {
    product_tile<T, R, C, false>(a_rows, a_step, b, b_row, k_begin, k_end, out_rows, add_rows, tail, multiplier);
  } else {
    product_tile<T, R, C, true>(a_rows, a_step, b, b_row, k_begin, k_end, out_rows, add_rows, tail, multiplier);
  }
}

/// The rows of `out` [m, columns c0 .. c0 + C vectors) a tile of R rows at a time, each tile
/// over its extent; a last short tile repeats a's last row into a row of scratch.
template <class T, int R, int C, class Extent>
void product_columns(Operand<T> a, std::int64_t m, const T* b, std::int64_t b_row, std::int64_t k, T* out,
                     std::int64_t out_row, std::int64_t c0, std::int64_t tail, const Epilogue<T>& epilogue,
                     const Extent& extent) {
  constexpr std::int64_t W = kWidth<T>;
  T unused[C * W];
  for (std::int64_t i0 = 0; i0 < m; i0 += R) {
    const TileExtent x = extent(i0, std::min(i0 + R, m));
    const std::int64_t columns = std::min(x.columns - c0, (C - 1) * W + tail);
    if (columns <= 0) continue;
    const std::int64_t vectors = (columns + W - 1) / W;
    const T* a_rows[R];
    T* out_rows[R];
    const T* add_rows[R];
    for (int r = 0; r < R; ++r) {
      const std::int64_t i = std::min(i0 + r, m - 1);
      a_rows[r] = a.data + i * a.row;
      out_rows[r] = i0 + r < m ? out + (i0 + r) * out_row : unused;
      add_rows[r] = epilogue.addend != nullptr ? epilogue.addend + i * epilogue.addend_row : nullptr;
    }
    narrowed_tile<T, R, C>(vectors, a_rows, a.step, b, b_row, std::max<std::int64_t>(x.k_begin, 0),
                           std::min(x.k_end, k), out_rows, add_rows, vectors == C ? tail : W, epilogue.multiplier);
  }
}

/// out [m, n] (row stride out_row, rows contiguous) = multiplier · a [m, k] b [k, n] (b's rows
/// contiguous, stride b_row), each tile of rows over its `extent`: the micro-kernel of Note
/// [Attention a head at a time].
template <class T, class Extent = WholeTiles>
void product(Operand<T> a, std::int64_t m, const T* b, std::int64_t b_row, std::int64_t k, std::int64_t n, T* out,
             std::int64_t out_row, Epilogue<T> epilogue = {}, const Extent& extent = {}) {
  constexpr std::int64_t W = kWidth<T>;
  for (std::int64_t c0 = 0; c0 < n; c0 += 4 * W) {
    const std::int64_t width = std::min(4 * W, n - c0);
    const std::int64_t vectors = (width + W - 1) / W, tail = width - (vectors - 1) * W;
    const T* bc = b + c0;
    T* oc = out + c0;
    Epilogue<T> e = epilogue;
    if (e.addend != nullptr) e.addend += c0;
    switch (vectors) {
      case 4: product_columns<T, 6, 4>(a, m, bc, b_row, k, oc, out_row, c0, tail, e, extent); break;
      case 3: product_columns<T, 6, 3>(a, m, bc, b_row, k, oc, out_row, c0, tail, e, extent); break;
      case 2: product_columns<T, 8, 2>(a, m, bc, b_row, k, oc, out_row, c0, tail, e, extent); break;
      default: product_columns<T, 8, 1>(a, m, bc, b_row, k, oc, out_row, c0, tail, e, extent); break;
    }
  }
}

/// A head's [rows, D] operand with contiguous rows: head b of a [B, rows, D] tensor, or of a
/// [B1, B2, rows, D] one whose heads b = b1 · B2 + b2 no single stride reaches (Note [Heads read
/// where the projection wrote them] in compile/passes/read_heads_in_place.cpp).
template <class T>
struct Head {
  T* data;
  std::int64_t row;
};
template <class T>
Head<T> head(const Tensor& t, std::int64_t b) {
  if (t.dim() == 4) {
    const std::int64_t inner = t.sizes()[1];
    return {t.data_ptr<T>() + b / inner * t.strides()[0] + b % inner * t.strides()[1], t.strides()[2]};
  }
  return {t.data_ptr<T>() + b * t.strides()[0], t.strides()[1]};
}

/// dst [d, s] = src [s, d]ᵀ: Kᵀ or Vᵀ, so that a score row's products read it as vectors.
template <class T>
void transpose_into(T* dst, const T* src, std::int64_t src_row, std::int64_t s, std::int64_t d) {
  if constexpr (sizeof(T) == 4) {
    transpose(src, src_row, s, d, dst, s);
  } else {
    for (std::int64_t j = 0; j < s; ++j) {
      for (std::int64_t e = 0; e < d; ++e) dst[e * s + j] = src[j * src_row + e];
    }
  }
}

/// This thread's scratch for a head: `n` values of T (two separate regions per thread).
template <class T, int Which>
T* head_scratch(std::int64_t n) {
  thread_local std::vector<T> buffer;
  if (static_cast<std::int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

struct Sizes {
  std::int64_t heads, L, S, D;
};
Sizes sizes_of(const Tensor& q, const Tensor& k) {
  const std::int64_t rows = q.dim() - 2;  // [.., L, D]: the heads are the dims before
  return {q.dim() == 4 ? q.sizes()[0] * q.sizes()[1] : q.sizes()[0], q.sizes()[rows], k.sizes()[k.dim() - 2],
          q.sizes()[rows + 1]};
}

/// Which part of a head's [L, S] scores can be nonzero: row i's first live[i] columns, a whole
/// number of vectors; first_row[j] is the first row whose live columns include column j
/// (Note [What the mask hides is not computed]).
struct LiveColumns {
  const std::int64_t* live;
  const std::int64_t* first_row;
};

/// LiveColumns of the [L, S] rows at `rows` (row stride `row`) where a value whose bits are
/// `dead`'s plays no part past a row's last value that is not (no rows: all of them live). A row
/// with no live value counts as live throughout, so that it is computed as eager computes it (a
/// fully masked row's NaNs).
template <class T>
LiveColumns live_columns(const T* rows, std::int64_t row, std::int64_t L, std::int64_t S, T dead) {
  constexpr std::int64_t W = kWidth<T>;
  using Bits = BlockBits<T, static_cast<int>(W)>;
  Bits dead_bits;
  for (std::int64_t e = 0; e < W; ++e) std::memcpy(&dead_bits[e], &dead, sizeof(T));
  // A vector at a time from the row's end; a short last vector is padded with dead values.
  const auto all_dead = [&dead_bits](const T* v, std::int64_t count) {
    Bits x;
    if (count == W) {
      std::memcpy(&x, v, sizeof(x));
    } else {
      x = dead_bits;
      std::memcpy(&x, v, static_cast<std::size_t>(count) * sizeof(T));
    }
    return !any_lane_set(x ^ dead_bits);
  };
  std::int64_t* const live = head_scratch<std::int64_t, 0>(L + S);
  std::int64_t* const first_row = live + L;
  std::int64_t j = 0;  // columns [0, j) have their first row already
  for (std::int64_t i = 0; i < L; ++i) {
    const T* const r = rows + i * row;
    std::int64_t end = (S - 1) / W * W;  // the last vector's start
    while (rows != nullptr && end >= 0 && all_dead(r + end, std::min(W, S - end))) end -= W;
    live[i] = end < 0 ? S : std::min(S, end + W);
    for (; j < live[i]; ++j) first_row[j] = i;
  }
  for (; j < S; ++j) first_row[j] = L;
  return {live, first_row};
}

/// The most live columns of rows [first, last).
inline std::int64_t most_live(const std::int64_t* live, std::int64_t first, std::int64_t last) {
  return *std::max_element(live + first, live + last);
}

/// Extents of the products over a head's rows i (the scores, dP = dO Vᵀ): their live columns.
struct LiveScoreColumns {
  const std::int64_t* live;
  TileExtent operator()(std::int64_t first, std::int64_t last) const {
    return {.columns = most_live(live, first, last)};
  }
};
/// Of the products whose k runs along a row i of P or dS (P V, dS K): its live columns.
struct LiveRowSums {
  const std::int64_t* live;
  TileExtent operator()(std::int64_t first, std::int64_t last) const {
    return {.k_end = most_live(live, first, last)};
  }
};
/// Of the products whose rows are columns j of P or dS, k running down them (Pᵀ dO, dSᵀ Q):
/// from the first row that column is live in.
struct LiveColumnSums {
  const std::int64_t* first_row;
  TileExtent operator()(std::int64_t first, std::int64_t /*last*/) const { return {.k_begin = first_row[first]}; }
};

/// Head b's [L, S] mask rows (row stride `row`); null when there is no mask.
template <class T>
struct MaskRows {
  const T* data;
  std::int64_t row;
};
template <class T>
MaskRows<T> mask_rows(const Tensor& mask, std::int64_t b) {
  if (!mask.defined()) return {nullptr, 0};
  return {mask.data_ptr<T>() + b * mask.strides()[0], mask.strides()[1]};
}

/// LiveColumns of head b's scores: where its mask rows stop being -inf.
template <class T>
LiveColumns masked_live_columns(const Tensor& mask, std::int64_t b, const Sizes& n) {
  const MaskRows<T> m = mask_rows<T>(mask, b);
  return live_columns(m.data, m.row, n.L, n.S, -std::numeric_limits<T>::infinity());
}

/// Asks for the `bytes` at `at` to start on their way into this core's cache, to be read, or
/// to be written (Note [The next head on its way]).
template <bool ForWriting>
void prefetch(const void* at, std::int64_t bytes) {
  for (std::int64_t line = 0; line < bytes; line += 64) {
    __builtin_prefetch(static_cast<const char*>(at) + line, ForWriting ? 1 : 0, 2);
  }
}
template <bool ForWriting, class T>
void prefetch_row(const Head<T>& h, std::int64_t i, std::int64_t D) {
  prefetch<ForWriting>(h.data + i * h.row, D * static_cast<std::int64_t>(sizeof(T)));
}

template <class T>
void forward_head(std::int64_t b, const Sizes& n, const Tensor& out, const Tensor& probs, const Tensor& q,
                  const Tensor& k, const Tensor& v, const Tensor& mask, T scale, const LiveColumns& live,
                  bool next_is_mine) {
  const Head<T> qh = head<T>(q, b), kh = head<T>(k, b), vh = head<T>(v, b), oh = head<T>(out, b);
  T* const p = probs.data_ptr<T>() + b * n.L * n.S;
  T* const kt = head_scratch<T, 0>(n.D * n.S);
  transpose_into(kt, kh.data, kh.row, n.S, n.D);
  const MaskRows<T> m = mask_rows<T>(mask, b);
  // The scores straight into P's rows, scaled and masked as they are stored, then softmaxed in place.
  product<T>({qh.data, qh.row, 1}, n.L, kt, n.S, n.D, n.S, p, n.S, {scale, m.data, m.row}, LiveScoreColumns{live.live});
  // While this head's rows are softmaxed, the same rows of the next head this thread takes.
  const std::int64_t next = next_is_mine ? b + 1 : b;
  const Head<T> next_q = head<T>(q, next), next_k = head<T>(k, next), next_v = head<T>(v, next);
  const Head<T> next_out = head<T>(out, next);
  T* const next_p = p + n.L * n.S;
  for (std::int64_t i = 0; i < n.L; ++i) {
    softmax_row(p + i * n.S, p + i * n.S, n.S, live.live[i]);
    if (!next_is_mine) continue;
    prefetch_row<false>(next_q, i, n.D);
    prefetch_row<true>(next_out, i, n.D);
    if (i < n.S) {
      prefetch_row<false>(next_k, i, n.D);
      prefetch_row<false>(next_v, i, n.D);
    }
    prefetch<true>(next_p + i * n.S, n.S * static_cast<std::int64_t>(sizeof(T)));
  }
  product<T>({p, n.S, 1}, n.L, vh.data, vh.row, n.S, n.D, oh.data, oh.row, {}, LiveRowSums{live.live});
}

template <class T>
void backward_head(std::int64_t b, const Sizes& n, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                   const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                   T scale, bool next_is_mine) {
  const Head<T> qh = head<T>(q, b), kh = head<T>(k, b), vh = head<T>(v, b), doh = head<T>(grad_out, b);
  const Head<T> dq = head<T>(grad_q, b), dk = head<T>(grad_k, b), dv = head<T>(grad_v, b);
  const T* const p = probs.data_ptr<T>() + b * n.L * n.S;
  // A probability that is 0 (masked, or too small for T) adds nothing to any product below.
  const LiveColumns live = live_columns(p, n.S, n.L, n.S, T(0));
  // dV = Pᵀ dO: row j of dV takes column j of P.
  product<T>({p, 1, n.S}, n.S, doh.data, doh.row, n.L, n.D, dv.data, dv.row, {}, LiveColumnSums{live.first_row});
  // dP = dO Vᵀ, then dS = softmax's backward, row by row in place.
  T* const vt = head_scratch<T, 0>(n.D * n.S);
  T* const ds = head_scratch<T, 1>(n.L * n.S + n.S);
  T* const products = ds + n.L * n.S;
  transpose_into(vt, vh.data, vh.row, n.S, n.D);
  product<T>({doh.data, doh.row, 1}, n.L, vt, n.S, n.D, n.S, ds, n.S, {}, LiveScoreColumns{live.live});
  // While this head's rows go through softmax's backward, the same rows of the next head.
  const std::int64_t next = next_is_mine ? b + 1 : b;
  const Head<T> next_q = head<T>(q, next), next_k = head<T>(k, next), next_v = head<T>(v, next);
  const Head<T> next_do = head<T>(grad_out, next), next_dq = head<T>(grad_q, next);
  const Head<T> next_dk = head<T>(grad_k, next), next_dv = head<T>(grad_v, next);
  const T* const next_p = p + n.L * n.S;
  for (std::int64_t i = 0; i < n.L; ++i) {
    softmax_backward_row(ds + i * n.S, ds + i * n.S, p + i * n.S, n.S, live.live[i], products);
    if (!next_is_mine) continue;
    prefetch_row<false>(next_q, i, n.D);
    prefetch_row<false>(next_do, i, n.D);
    prefetch_row<true>(next_dq, i, n.D);
    if (i < n.S) {
      prefetch_row<false>(next_k, i, n.D);
      prefetch_row<false>(next_v, i, n.D);
      prefetch_row<true>(next_dk, i, n.D);
      prefetch_row<true>(next_dv, i, n.D);
    }
    prefetch<false>(next_p + i * n.S, n.S * static_cast<std::int64_t>(sizeof(T)));
  }
  // dQ = dS K · scale and dK = dSᵀ Q · scale, each sum rounded before it is scaled, as eager.
  product<T>({ds, n.S, 1}, n.L, kh.data, kh.row, n.S, n.D, dq.data, dq.row, {scale}, LiveRowSums{live.live});
  product<T>({ds, 1, n.S}, n.S, qh.data, qh.row, n.L, n.D, dk.data, dk.row, {scale},
             LiveColumnSums{live.first_row});
}

using AttentionTypes = TypeList<float, double>;

}  // namespace

void attention_forward_kernel(const Tensor& out, const Tensor& probs, const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& mask, const Tensor& scale) {
  const Sizes n = sizes_of(q, k);
  dispatch_dtype<AttentionTypes>(q.dtype(), "attention_forward_cpu", [&]<typename T>() {
    const T s = *scale.data_ptr<T>();
    // A mask broadcast over the heads (a causal one), or none, is the same for every head: a
    // thread scans it once.
    const bool one_mask = !mask.defined() || mask.strides()[0] == 0;
    parallel_for(0, n.heads, 1, [&](std::int64_t begin, std::int64_t end) {
      LiveColumns live{};
      for (std::int64_t b = begin; b < end; ++b) {
        if (b == begin || !one_mask) live = masked_live_columns<T>(mask, b, n);
        forward_head<T>(b, n, out, probs, q, k, v, mask, s, live, /*next_is_mine=*/b + 1 < end);
      }
    });
  });
}

void attention_backward_kernel(const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                               const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& probs, const Tensor& scale) {
  const Sizes n = sizes_of(q, k);
  dispatch_dtype<AttentionTypes>(q.dtype(), "attention_backward_cpu", [&]<typename T>() {
    const T s = *scale.data_ptr<T>();
    parallel_for(0, n.heads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        backward_head<T>(b, n, grad_q, grad_k, grad_v, grad_out, q, k, v, probs, s, /*next_is_mine=*/b + 1 < end);
      }
    });
  });
}

}  // namespace kiln::cpu
