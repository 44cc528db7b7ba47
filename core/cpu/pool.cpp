// core/cpu/pool.cpp — max pooling on the CPU: each output is the largest element of its
// window (padding excluded, so it can never win), with the flat H*W index of the winner kept
// for the backward pass, which adds each window's gradient onto its winner. Planes (image,
// channel) are independent and split across threads. Compiled steps also pool a convolution's
// output in oneDNN's channel-blocked layout (Note [A convolution's blocked output pooled where
// it lies]).
// Read next: autograd/functions/conv.cpp (MaxPool2dFn).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/cpu/block_lanes.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cpu/parallel.h"
#include "core/cpu/pool_record.h"
#include "core/cpu/select.h"
#include "core/cpu/transpose_tiles.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/messages.h"

namespace kiln::cpu {

namespace {

/// For each output position along one axis: where its window starts, and which kernel taps
/// [lo, hi) fall inside the image.
struct Span {
  std::int64_t start, lo, hi;
};

std::vector<Span> spans(std::int64_t outs, std::int64_t stride, std::int64_t pad, std::int64_t dil, std::int64_t k,
                        std::int64_t size) {
  std::vector<Span> out(static_cast<std::size_t>(outs));
  for (std::int64_t o = 0; o < outs; ++o) {
    const std::int64_t start = o * stride - pad;
    const std::int64_t lo = start >= 0 ? 0 : (-start + dil - 1) / dil;
    const std::int64_t hi = std::min(k, (size - start + dil - 1) / dil);
    out[static_cast<std::size_t>(o)] = {start, lo, hi};
  }
  return out;
}

struct PoolPlan {
  std::vector<Span> rows, cols;
  std::int64_t width, dilation_h, dilation_w;
};

PoolPlan pool_plan(const Im2ColGeometry& g) {
  return {spans(g.out_h, g.stride_h, g.pad_h, g.dilation_h, g.kernel_h, g.height),
          spans(g.out_w, g.stride_w, g.pad_w, g.dilation_w, g.kernel_w, g.width), g.width, g.dilation_h,
          g.dilation_w};
}

/// Max pooling of one plane. KH and KW are the kernel size when known at compile time (the
/// common 2x2 and 3x3, whose tap loops then unroll into straight-line compares), 0 otherwise.
/// This path serves windows that padding cuts, a window at a time.
template <int KH, int KW, class T>
void pool_plane(const T* plane, T* values, std::int64_t* indices, const PoolPlan& p) {
  using M = OpMath<T>;
  const std::int64_t W = p.width;
  for (const Span& r : p.rows) {
    const std::int64_t row_lo = KH > 0 ? std::max<std::int64_t>(r.lo, 0) : r.lo;
    const std::int64_t row_hi = KH > 0 ? std::min<std::int64_t>(r.hi, KH) : r.hi;
    for (const Span& c : p.cols) {
      const std::int64_t col_lo = c.lo, col_hi = KW > 0 ? std::min<std::int64_t>(c.hi, KW) : c.hi;
      // Start from the window's first in-image element, so a window of -inf still names a
      // real position.
      std::int64_t at = (r.start + row_lo * p.dilation_h) * W + c.start + col_lo * p.dilation_w;
      M best = to_op_math(plane[at]);
      for (std::int64_t ki = row_lo; ki < row_hi; ++ki) {
        const std::int64_t row_start = (r.start + ki * p.dilation_h) * W + c.start;
        for (std::int64_t kj = col_lo; kj < col_hi; ++kj) {
          const std::int64_t i = row_start + kj * p.dilation_w;
          const M val = to_op_math(plane[i]);
          // PyTorch's rule: strictly greater keeps the first maximum, and the first NaN wins
          // for good. `!(val <= best)` is "greater, or val is NaN"; `best == best` is "best
          // is not NaN".
          const bool take = !(val <= best) & (best == best);
          best = select(take, val, best);
          at = select(take, i, at);
        }
      }
      *values++ = from_op_math<T>(best);
      *indices++ = at;
    }
  }
}

/// A position within one plane, as the separable path tracks it (planes of fewer than 2^31
/// elements take it; the others the window-at-a-time path).
using PlaneIndex = std::int32_t;

/// The geometry the separable path reads.
struct SeparablePlan {
  std::int64_t height, width, out_h, out_w, kernel_h, kernel_w, stride_h, dilation_h, dilation_w;
};

/// Max pooling of one plane whose windows all lie wholly inside the image and tile its rows
/// exactly (W == out_w * SW), the usual 2x2 / stride 2 case. A window's maximum is the
/// maximum over its rows of each row's maximum, so it runs in two passes:
///   horizontal: for every input row, the maximum over each window's columns. Because the
///     windows tile the rows, the whole plane is one run in which output q reads input
///     q*SW + kj*dw: a long loop with constant-stride loads, which vectorises (the loops over a
///     window's four taps, or one 14-wide output row, are too short to);
///   vertical: for every output, the maximum over its window's rows of those row maxima.
/// Going row by row and keeping the first strict maximum gives PyTorch's tie order (the
/// first maximum in row-major order within the window), and the first NaN still wins.
/// Positions are 32-bit inside the plane, the width of a float lane, so each select of a value
/// and its position is one vector operation; they widen to Int64 as they are stored.
template <int SW, class T>
void pool_plane_separable(const T* plane, T* values, std::int64_t* indices, const SeparablePlan& p,
                          OpMath<T>* row_max, PlaneIndex* row_at, OpMath<T>* best, PlaneIndex* best_at) {
  using M = OpMath<T>;
  const PlaneIndex row_outputs = static_cast<PlaneIndex>(p.height * p.out_w);
  for (PlaneIndex q = 0; q < row_outputs; ++q) {
    row_max[q] = to_op_math(plane[q * SW]);
    row_at[q] = q * SW;
  }
  for (std::int64_t kj = 1; kj < p.kernel_w; ++kj) {
    const PlaneIndex offset = static_cast<PlaneIndex>(kj * p.dilation_w);
    for (PlaneIndex q = 0; q < row_outputs; ++q) {
      const PlaneIndex i = q * SW + offset;
      const M val = to_op_math(plane[i]);
      const M cur = row_max[q];
      const bool take = !(val <= cur) & (cur == cur);  // the rule in pool_plane
      row_max[q] = select(take, val, cur);
      row_at[q] = select(take, i, row_at[q]);
    }
  }
  const std::int64_t OW = p.out_w;
  for (std::int64_t oy = 0; oy < p.out_h; ++oy) {
    M* out = best + oy * OW;
    PlaneIndex* at = best_at + oy * OW;
    const std::int64_t first_row = oy * p.stride_h;
    for (std::int64_t ox = 0; ox < OW; ++ox) {
      out[ox] = row_max[first_row * OW + ox];
      at[ox] = row_at[first_row * OW + ox];
    }
    for (std::int64_t ki = 1; ki < p.kernel_h; ++ki) {
      const M* vals = row_max + (first_row + ki * p.dilation_h) * OW;
      const PlaneIndex* from = row_at + (first_row + ki * p.dilation_h) * OW;
      for (std::int64_t ox = 0; ox < OW; ++ox) {
        const M cur = out[ox];
        const bool take = !(vals[ox] <= cur) & (cur == cur);
        out[ox] = select(take, vals[ox], cur);
        at[ox] = select(take, from[ox], at[ox]);
      }
    }
  }
  // A local bound: p's Int64 fields could alias `indices`, and with p.out_h in the condition
  // the compiler re-read it after every store and left this loop scalar (a quarter of the
  // function's time in the CNN step).
  const std::int64_t outputs = p.out_h * OW;
  for (std::int64_t o = 0; o < outputs; ++o) {
    values[o] = from_op_math<T>(best[o]);
    indices[o] = best_at[o];
  }
}

template <class T>
using PlaneFn = void (*)(const T*, T*, std::int64_t*, const PoolPlan&);

template <class T>
PlaneFn<T> plane_kernel_for(std::int64_t kh, std::int64_t kw) {
  if (kh == 2 && kw == 2) return &pool_plane<2, 2, T>;
  if (kh == 3 && kw == 3) return &pool_plane<3, 3, T>;
  return &pool_plane<0, 0, T>;
}

}  // namespace

void max_pool2d_kernel(const Tensor& values, const Tensor& indices, const Tensor& input, const Im2ColGeometry& g) {
  dispatch_dtype<NumericTypes>(input.dtype(), "max_pool2d_cpu", [&]<typename T>() {
    const std::int64_t planes = input.sizes()[0] * input.sizes()[1];
    const std::int64_t plane_in = g.height * g.width, plane_out = g.out_h * g.out_w;
    const PoolPlan plan = pool_plan(g);
    const T* x = input.data_ptr<T>();
    T* v = values.data_ptr<T>();
    std::int64_t* idx = indices.data_ptr<std::int64_t>();
    const std::int64_t work_per_plane = std::max<std::int64_t>(plane_out * g.kernel_h * g.kernel_w, 1);
    const std::int64_t grain = std::max<std::int64_t>(1, kGrainSize / work_per_plane);
    auto whole = [&](const Span& s, std::int64_t k) { return s.lo == 0 && s.hi == k; };
    const bool full_windows = std::all_of(plan.rows.begin(), plan.rows.end(), [&](const Span& s) { return whole(s, g.kernel_h); }) &&
                              std::all_of(plan.cols.begin(), plan.cols.end(), [&](const Span& s) { return whole(s, g.kernel_w); });
    const std::int64_t sw = g.stride_w;
    if (full_windows && plane_out > 0 && (sw == 1 || sw == 2) && g.width == g.out_w * sw &&
        plane_in <= std::numeric_limits<PlaneIndex>::max()) {
      const SeparablePlan sp{g.height,   g.width,    g.out_h,      g.out_w,     g.kernel_h,
                             g.kernel_w, g.stride_h, g.dilation_h, g.dilation_w};
      const auto separable = sw == 2 ? &pool_plane_separable<2, T> : &pool_plane_separable<1, T>;
      parallel_for(0, planes, grain, [&](std::int64_t b, std::int64_t e) {
        std::vector<OpMath<T>> row_max(static_cast<std::size_t>(g.height * g.out_w)), best(static_cast<std::size_t>(plane_out));
        std::vector<PlaneIndex> row_at(row_max.size()), best_at(best.size());
        for (std::int64_t p = b; p < e; ++p) {
          separable(x + p * plane_in, v + p * plane_out, idx + p * plane_out, sp, row_max.data(), row_at.data(),
                    best.data(), best_at.data());
        }
      });
      return;
    }
    const PlaneFn<T> pool = plane_kernel_for<T>(g.kernel_h, g.kernel_w);
    parallel_for(0, planes, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t p = b; p < e; ++p) pool(x + p * plane_in, v + p * plane_out, idx + p * plane_out, plan);
    });
  });
}

// Note [A convolution's blocked output pooled where it lies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// oneDNN's convolution writes its output in channel blocks (nChw16c on AVX-512; channels-last
// from its AMX BFloat16 kernels, which is blocks of 16 side by side in a pixel), and eagerly
// Kiln reorders it to NCHW at the op boundary (Note [Layouts at op boundaries]) before the pool
// reads it again: for train_cnn's second layer, 12.8 MB read and written only to be read once
// more. A compiled step knows the pool is the output's only reader, so its fused kernel
// (ConvKernels::forward_relu_max_pool) hands the pool the blocked buffer, and the backward
// (ConvKernels::backward_through_max_pool) unpools the gradient straight into the blocked
// layout both of the convolution's backward primitives read. Only the pooled values, indices
// and gradient (a quarter of the size) cross in NCHW.
// In a block every lane is one channel at the same (h, w), so a window is visited tap by tap in
// pool_plane's order with all the lanes at once, the loop over lanes a vector operation: the
// same rule (the first strict maximum, the first NaN wins) in the same order for each channel,
// so values and indices are max_pool2d_kernel's bit for bit, as the backward's sums are
// pool_backward's (tests/core/test_pool_blocked.cpp compares them on NaN, ties and padding).

namespace {

/// The element offset of (h, w) in a channel block.
inline std::int64_t block_offset(const ChannelBlockedLayout& l, std::int64_t h, std::int64_t w) {
  return h * l.stride_h + w * l.stride_w;
}

/// Max pooling of one (image, channel block) into the `lanes` planes at `values`/`indices`
/// (each plane_out long): pool_plane's loop, each tap a B-lane step; with Relu, of relu's
/// output (functors.h's Relu, NaN kept) computed as each element is read. (Window records come
/// only from 2x2 pools, which pool_channel_block_2x2 takes.)
template <int B, bool Relu, class T>
void pool_channel_block(const T* block, T* values, std::int64_t* indices, std::int64_t lanes, std::int64_t plane_out,
                        const PoolPlan& p, const ChannelBlockedLayout& layout) {
  using M = OpMath<T>;
  std::int64_t o = 0;
  for (const Span& r : p.rows) {
    for (const Span& c : p.cols) {
      M best[B];
      PlaneIndex at[B];
      const std::int64_t y0 = r.start + r.lo * p.dilation_h, x0 = c.start + c.lo * p.dilation_w;
      const T* first = block + block_offset(layout, y0, x0);
      auto read = [](T v) {
        const M m = to_op_math(v);
        if constexpr (Relu) return select(m < M(0), M(0), m);
        return m;
      };
      for (int l = 0; l < B; ++l) {
        best[l] = read(first[l]);
        at[l] = static_cast<PlaneIndex>(y0 * p.width + x0);
      }
      for (std::int64_t ki = r.lo; ki < r.hi; ++ki) {
        const std::int64_t y = r.start + ki * p.dilation_h;
        for (std::int64_t kj = c.lo; kj < c.hi; ++kj) {
          const std::int64_t x = c.start + kj * p.dilation_w;
          const T* tap = block + block_offset(layout, y, x);
          const PlaneIndex i = static_cast<PlaneIndex>(y * p.width + x);
          for (int l = 0; l < B; ++l) {
            const M val = read(tap[l]);
            const bool take = !(val <= best[l]) & (best[l] == best[l]);  // the rule in pool_plane
            best[l] = select(take, val, best[l]);
            at[l] = select(take, i, at[l]);
          }
        }
      }
      for (std::int64_t l = 0; l < lanes; ++l) {
        values[l * plane_out + o] = from_op_math<T>(best[l]);
        indices[l * plane_out + o] = at[l];
      }
      ++o;
    }
  }
}

// Note [A run of windows stored a plane at a time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A block holds B channels side by side, the pooled values and records B planes apart, so a
// window pooled with all its lanes at once has one element for each of B planes. Stored a
// window at a time, that is B scattered stores per window, and the four taps, reached through
// a pointer array indexed by the tap, became gathers: conv2's pool in train_cnn took 4x a
// memcpy of its input on a Zen 4 (AVX-512), 10x in BFloat16. The 2x2 kernels below pool a run
// of windows into a small buffer, a window to a row, each tap one call over contiguous lanes,
// and then store each lane's run of windows to its plane in one go; the unpool reads its
// gradients and records the same way and writes each window's four cells whole. A window's
// lanes are one vector (core/cpu/block_lanes.h), and the runs move between planes and rows in
// 16 x 16 tiles (transpose_tiles.h): written as loops over B lanes, GCC had compiled the window
// into half-width vectors, lane extracts and a scalar widening per record byte, and on the Zen 4
// here (2 threads, BM_MaxPool2dReluChannelBlockedConv2Output and its backward, the two builds
// turn by turn) the vectors took the BFloat16 pool from 0.29 to 0.18-0.20 ms, its unpool from
// 0.26 to 0.13, the Float32 pool from 0.24-0.26 to 0.16-0.23 and its unpool from 0.18 to
// 0.15-0.17 (a memcpy of the Float32 input: 0.19). The rule, the taps' order and each sum are
// the ones above, down to the sign of a zero and a NaN's bits (tests/core/test_pool.cpp,
// tests/compile/test_pool_records.cpp).

/// pool_channel_block for a 2x2 pool of stride 2 whose windows are all whole
/// (pools_whole_2x2_windows): the same rule over the same four taps in the same order, written
/// out with no span bookkeeping, as the windows of conv2's output in train_cnn are, and stored
/// a run of windows at a time (Note [A run of windows stored a plane at a time]).
template <int B, bool Relu, class T>
void pool_channel_block_2x2(const T* block, T* values, std::int64_t* indices, std::uint8_t* records,
                            std::int64_t lanes, std::int64_t out_h, std::int64_t out_w, std::int64_t width,
                            const ChannelBlockedLayout& layout) {
  using Lanes = BlockLanes<T, B>;
  using Mask = BlockMask<T, B>;
  constexpr std::int64_t kRun = 64;  // windows per run: a plane of conv2's 7x7 output in one
  const std::int64_t plane_out = out_h * out_w;
  const auto read = [](const T* at) {
    const Lanes v = load_lanes<B>(at);
    if constexpr (Relu) return v < Lanes{} ? Lanes{} : v;
    return v;
  };
  T run_values[kRun][B];
  std::uint8_t run_records[kRun][B];
  for (std::int64_t first = 0; first < plane_out; first += kRun) {
    const std::int64_t count = std::min(kRun, plane_out - first);
    for (std::int64_t i = 0, o = first; i < count; ++i, ++o) {
      const std::int64_t py = o / out_w, px = o % out_w;
      const T* top = block + block_offset(layout, 2 * py, 2 * px);
      const T* bottom = top + layout.stride_h;
      Lanes best = read(top);
      Mask at{};  // the winning tap: its row in bit 1, its column in bit 0
      // The taps in pool_plane's order, each lane by pool_plane's rule.
      const auto tap = [&](const T* lanes_at, int t) {
        const Lanes value = read(lanes_at);
        const Mask take = ~(value <= best) & (best == best);
        best = take ? value : best;
        at = take ? Mask{} + t : at;
      };
      tap(top + layout.stride_w, 1);
      tap(bottom, 2);
      tap(bottom + layout.stride_w, 3);
      // best is a value as read (or relu's +0), so storing it rounds nothing but a NaN's
      // payload, and relu's verdict on it is the verdict on the stored value.
      store_lanes<B>(run_values[i], best);
      const Mask passes = ~(best <= Lanes{});
      store_lane_bytes<T, B>(run_records[i], at | (passes & pool_record<int>(false, false, true)));
    }
    // Each lane's run of windows goes to its plane through 16 x 16 tiles (transpose_tiles.h).
    if constexpr (sizeof(T) <= 4) {
      transpose(&run_values[0][0], B, count, lanes, values + first, plane_out);
    } else {
      for (std::int64_t l = 0; l < lanes; ++l) {
        for (std::int64_t i = 0; i < count; ++i) values[l * plane_out + first + i] = run_values[i][l];
      }
    }
    if (records != nullptr) {
      transpose(&run_records[0][0], B, count, lanes, records + first, plane_out);
      continue;
    }
    for (std::int64_t l = 0; l < lanes; ++l) {
      std::int64_t* lane_indices = indices + l * plane_out + first;
      for (std::int64_t i = 0, o = first; i < count; ++i, ++o) {
        lane_indices[i] = pool_record_winner(run_records[i][l], o / out_w, o % out_w, width);
      }
    }
  }
}

/// Whether a block's rows follow each other with no gap (oneDNN's dense nChw16c): the block is
/// then one run, and a position's offset its flat index times the lane count.
bool is_dense_block(const ChannelBlockedLayout& layout, std::int64_t width) {
  return layout.stride_w == layout.block && layout.stride_h == width * layout.block;
}

/// pool_backward for one (image, channel block): zeros, then each window's gradient added onto
/// its winner in the window's order, unless the pooled value (with `values`) is not positive;
/// or with `records` (indices and values null), where and whether they say.
template <int B, class T>
void unpool_channel_block(T* block, const T* grad, const T* values, const std::int64_t* indices,
                          const std::uint8_t* records, std::int64_t lanes, std::int64_t height, std::int64_t width,
                          std::int64_t out_w, std::int64_t plane_out, const ChannelBlockedLayout& layout) {
  const std::int64_t plane_in = height * width;
  // A dense block needs no division per element.
  const bool dense = is_dense_block(layout, width);
  if (dense) {
    std::fill_n(block, plane_in * B, T(0));
  } else {
    for (std::int64_t y = 0; y < height; ++y) {
      for (std::int64_t x = 0; x < width; ++x) std::fill_n(block + block_offset(layout, y, x), B, T(0));
    }
  }
  for (std::int64_t l = 0; l < lanes; ++l) {
    const T* g = grad + l * plane_out;
    // threshold_backward's test, without a branch (relu makes it a coin flip): a window it
    // stops adds +0, which leaves every element as it was (each starts at +0, so none is -0).
    const auto add = [&](std::int64_t o, std::int64_t at, bool passes) {
      T& e = block[(dense ? at * B : block_offset(layout, at / width, at % width)) + l];
      e = from_op_math<T>(to_op_math(e) + select(passes, to_op_math(g[o]), OpMath<T>(0)));
    };
    if (records != nullptr) {
      const std::uint8_t* record = records + l * plane_out;
      for (std::int64_t o = 0, py = 0; o < plane_out; ++py) {
        for (std::int64_t px = 0; px < out_w; ++px, ++o) {
          add(o, pool_record_winner(record[o], py, px, width), pool_record_passes(record[o]));
        }
      }
      continue;
    }
    const T* value = values != nullptr ? values + l * plane_out : nullptr;
    const std::int64_t* winner = indices + l * plane_out;
    for (std::int64_t o = 0; o < plane_out; ++o) {
      const std::int64_t at = winner[o];
      KILN_CHECK_INDEX(at >= 0 && at < plane_in, msg::index_out_of_bounds(at, 1, plane_in));
      add(o, at, value == nullptr || !(to_op_math(value[o]) <= 0));
    }
  }
}

/// unpool_channel_block for records of a 2x2, stride-2 pool of whole windows into a dense block
/// (Note [A run of windows stored a plane at a time]): the windows tile the plane
/// without overlap, so each cell takes at most one window's gradient and is written once, as
/// +0 plus that gradient or plus +0, the sum the zero fill and the add made. A run of windows'
/// gradients and records is read a plane at a time into small buffers, then each window's four
/// cells are written with all their lanes at once; the lanes past `lanes` (a padded last block)
/// get +0, as the fill gave them.
template <int B, class T>
void unpool_channel_block_2x2(T* block, const T* grad, const std::uint8_t* records, std::int64_t lanes,
                              std::int64_t height, std::int64_t width, std::int64_t out_h, std::int64_t out_w) {
  using Lanes = BlockLanes<T, B>;
  using Mask = BlockMask<T, B>;
  constexpr std::int64_t kRun = 64;
  const std::int64_t plane_out = out_h * out_w;
  // The last row and column of an odd plane are in no window.
  for (std::int64_t y = 2 * out_h; y < height; ++y) std::fill_n(block + y * width * B, width * B, T(0));
  for (std::int64_t y = 0; y < 2 * out_h && 2 * out_w < width; ++y) {
    std::fill_n(block + (y * width + 2 * out_w) * B, (width - 2 * out_w) * B, T(0));
  }
  T run_grad[kRun][B];
  std::uint8_t run_records[kRun][B];
  // The lanes no plane fills (a padded last block) keep a record that passes nothing, so their
  // cells get +0 whatever their gradient lanes hold.
  if (lanes < B) std::fill_n(&run_records[0][0], kRun * B, std::uint8_t{0});
  for (std::int64_t first = 0; first < plane_out; first += kRun) {
    const std::int64_t count = std::min(kRun, plane_out - first);
    if constexpr (sizeof(T) <= 4) {
      transpose(grad + first, plane_out, lanes, count, &run_grad[0][0], B);
    } else {
      for (std::int64_t l = 0; l < lanes; ++l) {
        for (std::int64_t i = 0; i < count; ++i) run_grad[i][l] = grad[l * plane_out + first + i];
      }
    }
    transpose(records + first, plane_out, lanes, count, &run_records[0][0], B);
    for (std::int64_t i = 0, o = first; i < count; ++i, ++o) {
      const std::int64_t py = o / out_w, px = o % out_w;
      const Mask record = widen_lane_bytes<T, B>(run_records[i]);
      const Lanes passed = (record & pool_record<int>(false, false, true)) != Mask{} ? load_lanes<B>(run_grad[i]) : Lanes{};
      // A window's cells are +0 plus its gradient or plus +0, in pool_plane's tap order: the
      // winner's bits are made once, the others are +0's (all bits clear).
      using Bits = BlockBits<T, B>;
      const Bits winner = lanes_as_bits<B, T>(Lanes{} + passed);
      const Bits cell = __builtin_convertvector(record & 3, Bits);
      const auto write = [&](T* lanes_at, int tap) {
        const Bits bits = cell == static_cast<std::remove_cvref_t<decltype(Bits{}[0])>>(tap) ? winner : Bits{};
        std::memcpy(static_cast<void*>(lanes_at), &bits, sizeof(bits));
      };
      T* top = block + (2 * py * width + 2 * px) * B;
      write(top, 0);
      write(top + B, 1);
      write(top + width * B, 2);
      write(top + (width + 1) * B, 3);
    }
  }
}

/// Runs `body(image, channel block, lanes)` for every block of a [images, channels] batch,
/// split across threads.
template <class Body>
void for_each_channel_block(std::int64_t images, std::int64_t channels, std::int64_t block, std::int64_t work,
                            const Body& body) {
  const std::int64_t blocks = (channels + block - 1) / block;
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(work * block, 1));
  parallel_for(0, images * blocks, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t n = t / blocks, cb = t % blocks;
      body(n, cb, std::min(block, channels - cb * block));
    }
  });
}

/// Calls f.template operator()<B>() for the block widths the blocked kernels are built for.
template <class F>
void with_block_width(std::int64_t block, const F& f) {
  if (block == 16) return f.template operator()<16>();
  KILN_CHECK(block == 8, "max_pool2d: channel blocks of 8 or 16 lanes expected, got ", block);
  f.template operator()<8>();
}

}  // namespace

void max_pool2d_channel_blocked_kernel(const Tensor& values, const Tensor& indices, const Tensor& input,
                                       const ChannelBlockedLayout& layout, const Im2ColGeometry& g, bool relu) {
  KILN_CHECK(g.height * g.width <= std::numeric_limits<PlaneIndex>::max(), "max_pool2d: a plane of ",
             g.height * g.width, " elements is past the blocked kernel's 32-bit positions");
  const bool records = holds_pool_records(indices);
  KILN_CHECK(!records || pools_whole_2x2_windows(g), "max_pool2d: window records need a 2x2 pool of stride 2");
  dispatch_dtype<FloatingTypes>(input.dtype(), "max_pool2d_channel_blocked_cpu", [&]<typename T>() {
    const std::int64_t images = values.sizes()[0], channels = values.sizes()[1], plane_out = g.out_h * g.out_w;
    const PoolPlan plan = pool_plan(g);
    const T* x = input.data_ptr<T>();
    T* v = values.data_ptr<T>();
    std::int64_t* idx = records ? nullptr : indices.data_ptr<std::int64_t>();
    std::uint8_t* rec = records ? indices.data_ptr<std::uint8_t>() : nullptr;
    const bool whole_2x2 = pools_whole_2x2_windows(g);
    with_block_width(layout.block, [&]<int B>() {
      for_each_channel_block(images, channels, B, plane_out * g.kernel_h * g.kernel_w,
                             [&](std::int64_t n, std::int64_t cb, std::int64_t lanes) {
                               const std::int64_t plane = n * channels + cb * B;
                               if (whole_2x2) {
                                 const auto pool = relu ? &pool_channel_block_2x2<B, true, T>
                                                        : &pool_channel_block_2x2<B, false, T>;
                                 return pool(x + n * layout.stride_n + cb * layout.stride_block, v + plane * plane_out,
                                             idx != nullptr ? idx + plane * plane_out : nullptr,
                                             rec != nullptr ? rec + plane * plane_out : nullptr, lanes, g.out_h,
                                             g.out_w, g.width, layout);
                               }
                               const auto pool = relu ? &pool_channel_block<B, true, T> : &pool_channel_block<B, false, T>;
                               pool(x + n * layout.stride_n + cb * layout.stride_block, v + plane * plane_out,
                                    idx + plane * plane_out, lanes, plane_out, plan, layout);
                             });
    });
  });
}

void max_pool2d_backward_relu_channel_blocked_kernel(const Tensor& grad_input, const ChannelBlockedLayout& layout,
                                                     const Tensor& grad_output, const Tensor& indices,
                                                     const Tensor& values, const Im2ColGeometry& g) {
  dispatch_dtype<FloatingTypes>(grad_input.dtype(), "max_pool2d_backward_relu_channel_blocked_cpu", [&]<typename T>() {
    const std::int64_t images = grad_output.sizes()[0], channels = grad_output.sizes()[1];
    const std::int64_t plane_out = g.out_h * g.out_w;
    T* gi = grad_input.data_ptr<T>();
    const T* go = grad_output.data_ptr<T>();
    const bool records = holds_pool_records(indices);
    const T* v = values.defined() && !records ? values.data_ptr<T>() : nullptr;
    const std::int64_t* idx = records ? nullptr : indices.data_ptr<std::int64_t>();
    const std::uint8_t* rec = records ? indices.data_ptr<std::uint8_t>() : nullptr;
    const bool whole_2x2_into_dense = records && pools_whole_2x2_windows(g) && is_dense_block(layout, g.width);
    with_block_width(layout.block, [&]<int B>() {
      for_each_channel_block(images, channels, B, g.height * g.width,
                             [&](std::int64_t n, std::int64_t cb, std::int64_t lanes) {
                               const std::int64_t plane = (n * channels + cb * B) * plane_out;
                               if (whole_2x2_into_dense) {
                                 return unpool_channel_block_2x2<B, T>(gi + n * layout.stride_n + cb * layout.stride_block,
                                                                       go + plane, rec + plane, lanes, g.height,
                                                                       g.width, g.out_h, g.out_w);
                               }
                               unpool_channel_block<B, T>(gi + n * layout.stride_n + cb * layout.stride_block,
                                                          go + plane, v != nullptr ? v + plane : nullptr,
                                                          idx != nullptr ? idx + plane : nullptr,
                                                          rec != nullptr ? rec + plane : nullptr, lanes, g.height,
                                                          g.width, g.out_w, plane_out, layout);
                             });
    });
  });
}

// One pass per plane while it is in cache: zero the plane's gradient, then add each window's
// gradient onto its winner (overlapping windows can share one). That is what zeros +
// scatter_add computed, without their three extra passes over the input-sized gradient (the
// fill, scatter_add's copy of it, and the index range check's min and max). With `values`,
// relu's backward rides along: a window whose value is not positive passes nothing on, which
// is threshold_backward(gradient, relu's output) at its winner, where relu's output is that value.
template <class T>
void pool_backward(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices, const Tensor& values) {
  const std::int64_t planes = grad_input.sizes()[0] * grad_input.sizes()[1];
  const std::int64_t plane_in = grad_input.sizes()[2] * grad_input.sizes()[3];
  const std::int64_t plane_out = grad_output.sizes()[2] * grad_output.sizes()[3];
  T* gi = grad_input.data_ptr<T>();
  const T* go = grad_output.data_ptr<T>();
  const bool records = holds_pool_records(indices);
  const std::int64_t grain = std::max<std::int64_t>(1, kGrainSize / std::max<std::int64_t>(plane_in, 1));
  if (records) {
    KILN_CHECK(values.defined(), "max_pool2d_backward: window records carry relu's backward, so only its fused kernel takes them");
    const std::uint8_t* rec = indices.data_ptr<std::uint8_t>();
    const std::int64_t width = grad_input.sizes()[3], out_w = grad_output.sizes()[3];
    parallel_for(0, planes, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t p = b; p < e; ++p) {
        T* plane = gi + p * plane_in;
        const T* g = go + p * plane_out;
        const std::uint8_t* record = rec + p * plane_out;
        std::fill(plane, plane + plane_in, T(0));
        for (std::int64_t o = 0, py = 0; o < plane_out; ++py) {
          for (std::int64_t px = 0; px < out_w; ++px, ++o) {
            if (!pool_record_passes(record[o])) continue;
            T& e = plane[pool_record_winner(record[o], py, px, width)];
            e = from_op_math<T>(to_op_math(e) + to_op_math(g[o]));
          }
        }
      }
    });
    return;
  }
  const T* v = values.defined() ? values.data_ptr<T>() : nullptr;
  const std::int64_t* idx = indices.data_ptr<std::int64_t>();
  parallel_for(0, planes, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      T* plane = gi + p * plane_in;
      const T* g = go + p * plane_out;
      const T* value = v != nullptr ? v + p * plane_out : nullptr;
      const std::int64_t* winner = idx + p * plane_out;
      std::fill(plane, plane + plane_in, T(0));
      for (std::int64_t o = 0; o < plane_out; ++o) {
        const std::int64_t at = winner[o];
        KILN_CHECK_INDEX(at >= 0 && at < plane_in, msg::index_out_of_bounds(at, 1, plane_in));
        if (value != nullptr && to_op_math(value[o]) <= 0) continue;  // threshold_backward's test
        plane[at] = from_op_math<T>(to_op_math(plane[at]) + to_op_math(g[o]));
      }
    }
  });
}

void max_pool2d_backward_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices) {
  dispatch_dtype<FloatingTypes>(grad_input.dtype(), "max_pool2d_backward_cpu", [&]<typename T>() {
    pool_backward<T>(grad_input, grad_output, indices, Tensor());
  });
}

void max_pool2d_backward_relu_kernel(const Tensor& grad_input, const Tensor& grad_output, const Tensor& indices,
                                     const Tensor& values) {
  dispatch_dtype<FloatingTypes>(grad_input.dtype(), "max_pool2d_backward_relu_cpu", [&]<typename T>() {
    pool_backward<T>(grad_input, grad_output, indices, values);
  });
}

}  // namespace kiln::cpu
