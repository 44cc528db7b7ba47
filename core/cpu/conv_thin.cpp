// core/cpu/conv_thin.cpp — the forward and the weight gradient of a convolution whose input
// has few channels (a network's first layer: 1 channel for Fashion-MNIST, 3 for RGB), computed
// directly. The forward is thin_conv2d_forward's comment; the weight gradient is
//   dW[o, c, i, j] = Σ_n Σ_y Σ_x dy[n, o, y, x] · x[n, c, y·sh - ph + i·dh, x·sw - pw + j·dw]
// Each output channel is a thread's work; for each image it slides the few input planes under
// its gradient plane, so both stay in L1/L2 and dy is read once. A GEMM formulation has a
// reduction of N·oh·ow (100,352 here) against 9 columns, which no blocking makes efficient:
// oneDNN's direct kernel needs 8 channels to fill a vector and ran this layer (1 -> 32, 28x28,
// batch 128) at 7 GFLOP/s, 7.3 ms plus 2.1 ms of reorders; this kernel took ~2.7 ms in the
// CNN step with its taps' accumulators in memory, ~1.4 ms with 3x3's nine in registers. Each
// image's partial sums (a row of ow products per tap, in float lanes) are added into double
// accumulators, so the 100,352-term sums keep Float32's accuracy bar (Note [How Kiln sums]).
// BFloat16 (a first layer under CPU autocast) runs the same float kernels: its planes are
// widened as they are padded, and each result is rounded once as it is stored. oneDNN's
// BFloat16 kernel for conv1 wrote a blocked output and took a reorder each way, as in Float32.
// A compiled step whose pooled activation lies in channel blocks gets the same bits from the
// kernels that hold output channels in lanes (core/cpu/conv_thin_channel_lanes.cpp).
// Read next: core/routes.h (which convolutions are thin), core/cpu/conv_routes.cpp,
// core/cpu/conv_thin_channel_lanes.cpp.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/channel_blocks.h"
#include "core/cpu/conv_thin_channel_lanes.h"
#include "core/cpu/parallel.h"
#include "core/cpu/pool_record.h"
#include "core/cpu/select.h"
#include "core/cpu/thin_planes.h"
#include "core/cpu/thread_budget.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/messages.h"
#include "core/half.h"
#include "core/profiler_hooks.h"

namespace kiln::cpu {

namespace {

using thin::kLanes;
using thin::Lanes;
using thin::load;
using thin::pad_plane;
using thin::PaddedImage;
using thin::widen;

/// Float results stored as T, rounded once.
template <class T>
void narrow(const float* from, std::int64_t n, T* to) {
  if constexpr (std::is_same_v<T, float>) {
    std::copy(from, from + n, to);
  } else {
    for (std::int64_t i = 0; i < n; ++i) to[i] = from_op_math<T>(from[i]);
  }
}

/// narrow(), with relu on the way (functors::Relu's rule: negatives become 0, NaN passes;
/// rounding to T keeps the sign, so relu before or after it is the same).
template <class T>
void narrow_relu(const float* from, std::int64_t n, T* to) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = from[i] < 0.0f ? 0.0f : from[i];
    if constexpr (std::is_same_v<T, float>) {
      to[i] = v;
    } else {
      to[i] = from_op_math<T>(v);
    }
  }
}

/// The sum of a plane of `rows` rows of `width` floats: each row in float lanes, the rows in
/// double, so the error stays that of a row's few dozen terms (Kiln's cascade sum does better
/// than a float accumulator over a whole image; this must not do worse).
double plane_sum(const float* plane, std::int64_t rows, std::int64_t width) {
  double sum = 0;
  for (std::int64_t y = 0; y < rows; ++y) {
    const float* row = plane + y * width;
    Lanes lanes{};
    std::int64_t x = 0;
    for (; x + kLanes <= width; x += kLanes) lanes += load(row + x);
    float row_sum = 0;
    for (std::int64_t l = 0; l < kLanes; ++l) row_sum += lanes[l];
    for (; x < width; ++x) row_sum += row[x];
    sum += row_sum;
  }
  return sum;
}

/// One input plane's taps at unit stride, for a kernel of KH x KW known at compile time:
/// tap (i, j) += dy[y, x..x+8) * in[y·sh + i·dh, x + j·dw..+8) over every row and chunk. The
/// KH·KW accumulators stay in registers and each chunk of dy is loaded once for all taps;
/// each tap still adds its products in row, then chunk order, as the general loop does.
template <int KH, int KW>
void accumulate_taps(const float* dy, std::int64_t dy_width, std::int64_t out_h, const float* plane,
                     std::int64_t in_width, std::int64_t stride_h, std::int64_t dilation_h, std::int64_t dilation_w,
                     Lanes* taps) {
  Lanes acc[KH * KW] = {};
  for (std::int64_t y = 0; y < out_h; ++y) {
    const float* dy_row = dy + y * dy_width;
    const float* in_row = plane + y * stride_h * in_width;
    for (std::int64_t xc = 0; xc < dy_width; xc += kLanes) {
      const Lanes d = load(dy_row + xc);
      for (int i = 0; i < KH; ++i) {
        for (int j = 0; j < KW; ++j) acc[i * KW + j] += d * load(in_row + i * dilation_h * in_width + j * dilation_w + xc);
      }
    }
  }
  for (int t = 0; t < KH * KW; ++t) taps[t] += acc[t];
}

/// Output row y of OB output channels at once, at unit stride, for a kernel of KH x KW known
/// at compile time: out_o[x..x+8) = bias_o + Σ over c, i, j of w_o[c, i, j] · in[c, y·sh + i·dh,
/// x + j·dw..+8), chunk by chunk, into rows (OB rows of row_width floats). Each input chunk is
/// loaded once for the OB channels, whose sums are independent chains: one chain of nine
/// dependent FMAs would wait on the FMA's latency instead of its throughput.
template <int KH, int KW, int OB>
void forward_rows(const float* image, std::int64_t channels, const PaddedImage& p, std::int64_t y,
                  const Im2ColGeometry& g, const float* w, const float* bias, float* rows) {
  const std::int64_t weights_per_output = channels * KH * KW;
  std::int64_t xc = 0;
  // Two chunks at a time where there are registers for them (AVX-512 has 32): 2·OB chains in
  // flight instead of OB hide the FMA's latency. Each lane's chain is the same either way.
  const auto chunks = [&]<int CH>() {
    Lanes acc[CH][OB];
    for (int ch = 0; ch < CH; ++ch) {
      for (int ob = 0; ob < OB; ++ob) acc[ch][ob] = Lanes{} + bias[ob];
    }
    for (std::int64_t c = 0; c < channels; ++c) {
      const float* in = image + c * p.in_height * p.in_width + y * g.stride_h * p.in_width + xc;
      const float* wc = w + c * KH * KW;
      for (int i = 0; i < KH; ++i) {
        for (int j = 0; j < KW; ++j) {
          for (int ch = 0; ch < CH; ++ch) {
            const Lanes v = load(in + ch * kLanes + i * g.dilation_h * p.in_width + j * g.dilation_w);
            for (int ob = 0; ob < OB; ++ob) acc[ch][ob] += wc[ob * weights_per_output + i * KW + j] * v;
          }
        }
      }
    }
    for (int ch = 0; ch < CH; ++ch) {
      for (int ob = 0; ob < OB; ++ob) std::memcpy(rows + ob * p.row_width + xc + ch * kLanes, &acc[ch][ob], sizeof(Lanes));
    }
    xc += CH * kLanes;
  };
#ifdef __AVX512F__
  while (xc + 2 * kLanes <= p.row_width) chunks.template operator()<2>();
#endif
  while (xc < p.row_width) chunks.template operator()<1>();
}

// For stride 1, x runs along lanes: each output row is cut into chunks of kLanes columns
// (the gradient plane padded with zeros to a whole number of chunks), and tap (i, j) of input
// channel c adds dy[y, x..x+8) * x_padded[c, y + i·dh, x + j·dw..+8) into its own lane
// accumulator. Other strides walk the columns one by one.
/// Where a weight gradient reads dY from when dY is a max pool's backward with relu's: the
/// pooled gradient, the pool's indices and its values (MaxPoolBackwardReluKernel's arguments).
template <class T>
struct PooledGradient {
  const T* grad;
  std::int64_t grad_block, channels;  // grad in channel blocks of grad_block (0: NCHW) of `channels`
  const std::int64_t* indices;   // with values; or
  const std::uint8_t* records;   // window records (Note [A pool window in one byte])
  const T* values;
  std::int64_t out_w, plane_out;  // pooled outputs per row and per plane
  const std::int64_t* padded_position;  // where flat plane position i lies in the padded rows
  std::int64_t padded_width;             // of a padded row
};

/// A plane's windows' four cells, each in window order: unpool_plane's scratch.
struct WindowCells {
  std::vector<float> upper_left, upper_right, lower_left, lower_right;
  explicit WindowCells(std::int64_t windows)
      : upper_left(static_cast<std::size_t>(windows)), upper_right(upper_left.size()),
        lower_left(upper_left.size()), lower_right(upper_left.size()) {}
};

/// Plane `plane` of dY as max_pool2d_backward_relu_kernel makes it (core/cpu/pool.cpp: zeros,
/// then in window order each window's gradient added onto its winner unless the pooled value
/// is not positive, rounded to T), written straight into padded rows of `out`. A window that
/// passes nothing adds +0 instead of branching (relu's test is a coin flip on real data): a
/// cell is never -0 (it starts at +0, and x + (-x) rounds to +0), so adding +0 changes nothing.
template <class T>
void unpool_plane(const PooledGradient<T>& p, std::int64_t plane, std::int64_t plane_in, std::int64_t padded_size,
                  float* out, WindowCells& cells) {
  const PlaneStart start = plane_start(plane, p.channels, p.plane_out, p.grad_block);
  const T* g = p.grad + start.offset;
  if (p.records != nullptr) {
    // Window (py, px) covers padded rows 2py, 2py + 1 at columns 2px, 2px + 1, and the windows
    // tile those rows, so each of its four cells is written: the winner's with the gradient,
    // the others with zeros. First each window's four cells, in window order (a loop over
    // contiguous records that vectorises); then the rows, each an interleave of two of them.
    // No fill, no scatter. `+ 0.0f` is the add onto a +0 cell below (-0 becomes +0). Cells no
    // window covers (padding columns, an odd size's last row and column) are never written
    // and keep the zeros the caller's buffer was made with.
    const std::uint8_t* record = p.records + plane * p.plane_out;
    float* c0 = cells.upper_left.data();
    float* c1 = cells.upper_right.data();
    float* c2 = cells.lower_left.data();
    float* c3 = cells.lower_right.data();
    for (std::int64_t o = 0; o < p.plane_out; ++o) {
      const std::uint8_t r = record[o];
      const float v = select(pool_record_passes(r), static_cast<float>(to_op_math(g[o * start.step])), 0.0f) + 0.0f;
      const unsigned cell = pool_record_cell(r);
      c0[o] = select(cell == 0, v, 0.0f);
      c1[o] = select(cell == 1, v, 0.0f);
      c2[o] = select(cell == 2, v, 0.0f);
      c3[o] = select(cell == 3, v, 0.0f);
    }
    for (std::int64_t o = 0, py = 0; o < p.plane_out; o += p.out_w, ++py) {
      float* top = out + 2 * py * p.padded_width;
      float* bottom = top + p.padded_width;
      for (std::int64_t px = 0; px < p.out_w; ++px) {
        top[2 * px] = c0[o + px];
        top[2 * px + 1] = c1[o + px];
        bottom[2 * px] = c2[o + px];
        bottom[2 * px + 1] = c3[o + px];
      }
    }
    return;
  }
  std::fill(out, out + padded_size, 0.0f);
  const auto add = [&](float& cell, std::int64_t o, bool passes) {
    cell = to_op_math(from_op_math<T>(cell + select(passes, static_cast<float>(to_op_math(g[o * start.step])), 0.0f)));
  };
  const T* value = p.values + plane * p.plane_out;
  const std::int64_t* winner = p.indices + plane * p.plane_out;
  for (std::int64_t o = 0; o < p.plane_out; ++o) {
    const std::int64_t at = winner[o];
    KILN_CHECK_INDEX(at >= 0 && at < plane_in, msg::index_out_of_bounds(at, 1, plane_in));
    add(out[p.padded_position[at]], o, !(to_op_math(value[o]) <= 0));  // threshold_backward's test
  }
}

template <class T>
void thin_weight_gradient(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                          const Tensor& input, const Im2ColGeometry& g, const PooledGradient<T>* pooled = nullptr) {
  const std::int64_t N = input.sizes()[0], C = input.sizes()[1], O = grad_weight.sizes()[0];
  const std::int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w, KH = g.kernel_h, KW = g.kernel_w;
  const T* x = input.data_ptr<T>();
  const T* dy = pooled == nullptr ? grad_output.data_ptr<T>() : nullptr;
  T* dw = grad_weight.data_ptr<T>();
  T* db = grad_bias.defined() ? grad_bias.data_ptr<T>() : nullptr;
  const std::int64_t taps = C * KH * KW;
  const bool unit_stride = g.stride_w == 1;
  const PaddedImage padded(g);
  const std::int64_t dy_width = padded.row_width, in_height = padded.in_height, in_width = padded.in_width;
  parallel_for(0, O, 1, [&](std::int64_t o_begin, std::int64_t o_end) {
    std::vector<float> padded_input(static_cast<std::size_t>(C * in_height * in_width));
    std::vector<float> padded_dy(static_cast<std::size_t>(OH * dy_width));
    WindowCells cells(pooled != nullptr ? pooled->plane_out : 0);
    std::vector<Lanes> lanes(static_cast<std::size_t>(taps));
    std::vector<double> acc(static_cast<std::size_t>((o_end - o_begin) * taps), 0.0);
    std::vector<double> bias_acc(static_cast<std::size_t>(o_end - o_begin), 0.0);
    for (std::int64_t n = 0; n < N; ++n) {
      padded.pad_image(x + n * C * H * W, C, g, padded_input.data());
      for (std::int64_t o = o_begin; o < o_end; ++o) {
        if (pooled != nullptr) {
          unpool_plane(*pooled, n * O + o, OH * OW, OH * dy_width, padded_dy.data(), cells);
        } else {
          pad_plane(dy + (n * O + o) * OH * OW, OH, OW, 0, 0, dy_width, padded_dy.data(), OH);
        }
        // The bias gradient while the plane is in cache (its padding is zeros).
        if (db != nullptr) bias_acc[static_cast<std::size_t>(o - o_begin)] += plane_sum(padded_dy.data(), OH, dy_width);
        std::fill(lanes.begin(), lanes.end(), Lanes{});
        for (std::int64_t c = 0; c < C; ++c) {
          const float* plane = padded_input.data() + c * in_height * in_width;
          if (unit_stride && KH == 3 && KW == 3) {
            accumulate_taps<3, 3>(padded_dy.data(), dy_width, OH, plane, in_width, g.stride_h, g.dilation_h,
                                  g.dilation_w, lanes.data() + c * KH * KW);
            continue;
          }
          for (std::int64_t y = 0; y < OH; ++y) {
            const float* dy_row = padded_dy.data() + y * dy_width;
            for (std::int64_t i = 0; i < KH; ++i) {
              const float* in_row = plane + (y * g.stride_h + i * g.dilation_h) * in_width;
              for (std::int64_t j = 0; j < KW; ++j) {
                Lanes& tap = lanes[static_cast<std::size_t>((c * KH + i) * KW + j)];
                const float* in = in_row + j * g.dilation_w;
                if (unit_stride) {
                  for (std::int64_t xc = 0; xc < dy_width; xc += kLanes) tap += load(dy_row + xc) * load(in + xc);
                } else {
                  for (std::int64_t col = 0; col < OW; ++col) tap[0] += dy_row[col] * in[col * g.stride_w];
                }
              }
            }
          }
        }
        // One image's sums in float lanes; the sum over images in double.
        double* out = acc.data() + (o - o_begin) * taps;
        for (std::int64_t t = 0; t < taps; ++t) {
          float image = 0;
          for (std::int64_t l = 0; l < kLanes; ++l) image += lanes[static_cast<std::size_t>(t)][l];
          out[t] += image;
        }
      }
    }
    for (std::int64_t o = o_begin; o < o_end; ++o) {
      for (std::int64_t t = 0; t < taps; ++t) {
        dw[o * taps + t] = from_op_math<T>(static_cast<float>(acc[static_cast<std::size_t>((o - o_begin) * taps + t)]));
      }
      if (db != nullptr) db[o] = from_op_math<T>(static_cast<float>(bias_acc[static_cast<std::size_t>(o - o_begin)]));
    }
  });
}

// Each image is a thread's work: its few input planes are padded once, then every output
// channel's rows are computed from them in L1 (at unit stride with a 3x3 kernel, 8 columns
// per chunk and 8 channels at a time; one output at a time otherwise) and written to the
// output once, in NCHW, bias included. oneDNN's kernel for the CNN's conv1 writes a blocked
// output that then takes a second pass to reorder to NCHW (1.3 ms + 2.2 ms per step).
/// Where a pooled forward writes: the 2x2 / stride 2 max pool of the relu'd output, whose
/// plane is out_h x out_w (the convolution's rows 0..2·out_h and columns 0..2·out_w).
template <class T>
struct PooledOutput {
  T* values;
  std::int64_t values_block, channels;  // values in channel blocks of values_block (0: NCHW) of `channels`
  std::int64_t* indices;  // or
  std::uint8_t* records;  // window records (Note [A pool window in one byte])
  std::int64_t out_h, out_w;
};

/// Pooled row `py` of `count` planes (first_plane onward) from their relu'd convolution rows:
/// `top` and `bottom` hold rows 2·py and 2·py + 1 of each plane, row_width floats apart. By
/// max_pool2d_kernel's rule and order (core/cpu/pool.cpp: each row's maximum over its two
/// columns, then the lower row's if it beats the upper's; the first maximum and the first NaN
/// win), on the values as they would have been stored in T. The planes' rows are one run of
/// column pairs (row_width is even), so the compare loop is long, branch-free (select.h) and
/// vectorises, as the pool's own horizontal pass does; `best` and `best_at` hold its results.
template <class T>
void pool_row_pairs(const float* top, const float* bottom, std::int64_t count, std::int64_t row_width,
                    std::int64_t conv_width, std::int64_t py, std::int64_t first_plane, const PooledOutput<T>& pool,
                    float* best, std::uint8_t* best_at) {
  const auto stored = [](float v) { return to_op_math(from_op_math<T>(select(v < 0.0f, 0.0f, v))); };
  const std::int64_t pairs = count * row_width / 2;
  for (std::int64_t q = 0; q < pairs; ++q) {
    const float t0 = stored(top[2 * q]), t1 = stored(top[2 * q + 1]);
    const float b0 = stored(bottom[2 * q]), b1 = stored(bottom[2 * q + 1]);
    const bool right_top = !(t1 <= t0) & (t0 == t0), right_bottom = !(b1 <= b0) & (b0 == b0);
    const float top_max = select(right_top, t1, t0), bottom_max = select(right_bottom, b1, b0);
    const bool take_bottom = !(bottom_max <= top_max) & (top_max == top_max);
    best[q] = select(take_bottom, bottom_max, top_max);
    // The window's record, made here where the loop vectorises (an index needs only its
    // winner's bits, Note [A pool window in one byte]).
    best_at[q] = pool_record(take_bottom, take_bottom ? right_bottom : right_top, !(best[q] <= 0.0f));
  }
  const std::int64_t half = row_width / 2;
  // Planes that are lanes of one channel block lie side by side: each pooled column's `count`
  // values go out as one contiguous run. Stored a plane at a time instead, each value was a
  // narrow store `block` elements from the last (a third of the thin BFloat16 forward's time).
  const bool side_by_side =
      pool.values_block != 0 && first_plane % pool.channels % pool.values_block + count <= pool.values_block;
  if (side_by_side) {
    const PlaneStart start = plane_start(first_plane, pool.channels, pool.out_h * pool.out_w, pool.values_block);
    T* row = pool.values + start.offset + py * pool.out_w * start.step;
    for (std::int64_t px = 0; px < pool.out_w; ++px) {
      for (std::int64_t ob = 0; ob < count; ++ob) row[px * start.step + ob] = from_op_math<T>(best[ob * half + px]);
    }
  }
  for (std::int64_t ob = 0; ob < count; ++ob) {
    const std::int64_t first = ((first_plane + ob) * pool.out_h + py) * pool.out_w;
    const float* value = best + ob * half;
    const std::uint8_t* at = best_at + ob * half;
    if (!side_by_side) {
      const PlaneStart plane =
          plane_start(first_plane + ob, pool.channels, pool.out_h * pool.out_w, pool.values_block);
      T* row = pool.values + plane.offset + py * pool.out_w * plane.step;
      for (std::int64_t px = 0; px < pool.out_w; ++px) row[px * plane.step] = from_op_math<T>(value[px]);
    }
    if (pool.records != nullptr) {
      // One copy: an element-wise loop of out_w byte stores ran unvectorised (too short for
      // the compiler's vector path) and took a third of the thin BFloat16 forward's time.
      std::memcpy(pool.records + first, at, static_cast<std::size_t>(pool.out_w));
      continue;
    }
    for (std::int64_t px = 0; px < pool.out_w; ++px) {
      pool.indices[first + px] = pool_record_winner(at[px], py, px, conv_width);
    }
  }
}

/// A weight or bias in float, which the kernels read (null when undefined): the tensor's own
/// data for Float32, a widened copy in `copy` for a half type.
template <class T>
const float* as_float(const Tensor& t, std::vector<float>& copy) {
  if (!t.defined()) return nullptr;
  if constexpr (std::is_same_v<T, float>) {
    return t.data_ptr<float>();
  } else {
    copy.resize(static_cast<std::size_t>(t.numel()));
    widen(t.data_ptr<T>(), t.numel(), copy.data());
    return copy.data();
  }
}

template <class T>
void thin_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                  const Im2ColGeometry& g, bool relu, const PooledOutput<T>* pool = nullptr) {
  const std::int64_t N = input.sizes()[0], C = input.sizes()[1], O = weight.sizes()[0];
  const std::int64_t H = g.height, W = g.width, OH = g.out_h, OW = g.out_w, KH = g.kernel_h, KW = g.kernel_w;
  const T* x = input.data_ptr<T>();
  T* y = pool == nullptr ? out.data_ptr<T>() : nullptr;
  // Pooled, only the rows the pool reads are made, two at a time, and none is stored.
  const std::int64_t rows_made = pool == nullptr ? OH : 2 * pool->out_h;
  // Stores rows (count planes' row oy, row_width apart), or pools them with the rows before.
  const auto emit = [&](const float* rows, std::int64_t row_width, std::int64_t n, std::int64_t o,
                        std::int64_t count, std::int64_t oy, float* best, std::uint8_t* best_at) {
    if (pool != nullptr) {
      if (oy % 2 == 0) return;
      const float* above = rows - row_width * count;
      if (row_width % 2 == 0) {
        return pool_row_pairs<T>(above, rows, count, row_width, OW, oy / 2, n * O + o, *pool, best, best_at);
      }
      // An odd width (a strided convolution's unpadded rows): a plane's last pair would run into
      // the next plane, so one plane at a time.
      for (std::int64_t ob = 0; ob < count; ++ob) {
        pool_row_pairs<T>(above + ob * row_width, rows + ob * row_width, 1, row_width, OW, oy / 2, n * O + o + ob,
                          *pool, best, best_at);
      }
      return;
    }
    for (std::int64_t ob = 0; ob < count; ++ob) {
      (relu ? &narrow_relu<T> : &narrow<T>)(rows + ob * row_width, OW, y + ((n * O + o + ob) * OH + oy) * OW);
    }
  };
  std::vector<float> wide_weight, wide_bias;
  const float* w = as_float<T>(weight, wide_weight);
  const float* b = as_float<T>(bias, wide_bias);
  const PaddedImage padded(g);
  const bool unrolled = g.stride_w == 1 && KH == 3 && KW == 3;
  constexpr int kBlock = 8;  // output channels per pass of forward_rows
  const std::vector<float> zeros(static_cast<std::size_t>(O), 0.0f);
  const float* biases = b != nullptr ? b : zeros.data();
  parallel_for(0, N, 1, [&](std::int64_t n_begin, std::int64_t n_end) {
    std::vector<float> image(static_cast<std::size_t>(C * padded.in_height * padded.in_width));
    // Two blocks of rows: a pooled forward pools row oy - 1's block with row oy's.
    std::vector<float> rows(static_cast<std::size_t>(2 * kBlock * padded.row_width));
    std::vector<float> best(static_cast<std::size_t>(pool != nullptr ? kBlock * padded.row_width / 2 : 0));
    std::vector<std::uint8_t> best_at(best.size());
    for (std::int64_t n = n_begin; n < n_end; ++n) {
      padded.pad_image(x + n * C * H * W, C, g, image.data());
      std::int64_t o = 0;
      for (; unrolled && o + kBlock <= O; o += kBlock) {
        for (std::int64_t oy = 0; oy < rows_made; ++oy) {
          float* block = rows.data() + (oy % 2) * kBlock * padded.row_width;
          forward_rows<3, 3, kBlock>(image.data(), C, padded, oy, g, w + o * C * KH * KW, biases + o, block);
          emit(block, padded.row_width, n, o, kBlock, oy, best.data(), best_at.data());
        }
      }
      for (; o < O; ++o) {
        const float* wo = w + o * C * KH * KW;
        const float bo = biases[o];
        for (std::int64_t oy = 0; oy < rows_made; ++oy) {
          float* row = rows.data() + (oy % 2) * padded.row_width;
          if (unrolled) {
            forward_rows<3, 3, 1>(image.data(), C, padded, oy, g, wo, &bo, row);
          } else {
            for (std::int64_t ox = 0; ox < OW; ++ox) {
              float acc = bo;
              for (std::int64_t c = 0; c < C; ++c) {
                const float* in = image.data() + c * padded.in_height * padded.in_width;
                for (std::int64_t i = 0; i < KH; ++i) {
                  const float* in_row = in + (oy * g.stride_h + i * g.dilation_h) * padded.in_width + ox * g.stride_w;
                  for (std::int64_t j = 0; j < KW; ++j) acc += wo[(c * KH + i) * KW + j] * in_row[j * g.dilation_w];
                }
              }
              row[ox] = acc;
            }
          }
          emit(row, padded.row_width, n, o, 1, oy, best.data(), best_at.data());
        }
      }
    }
  });
}

using ThinTypes = TypeList<float, Eigen::bfloat16>;

}  // namespace

void thin_conv2d_weight_gradient(const Tensor& grad_weight, const Tensor& grad_output, const Tensor& input,
                                 const Im2ColGeometry& g, const Tensor& grad_bias) {
  if (grad_weight.is_meta()) return;  // a planned step: no scratch beyond std::vectors
  profiler::note_route(profiler::Route::Thin);
  dispatch_dtype<ThinTypes>(input.dtype(), "thin_conv2d_weight_gradient", [&]<typename T>() {
    thin_weight_gradient<T>(grad_weight, grad_bias, grad_output, input, g);
  });
}

void thin_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const Im2ColGeometry& g, bool relu) {
  if (out.is_meta()) return;
  profiler::note_route(profiler::Route::Thin);
  dispatch_dtype<ThinTypes>(input.dtype(), "thin_conv2d_forward", [&]<typename T>() {
    thin_forward<T>(out, input, weight, bias, g, relu);
  });
}

void thin_conv2d_weight_gradient_through_max_pool(const Tensor& grad_weight, const Tensor& grad_pooled,
                                                  const Tensor& indices, const Tensor& values, const Tensor& input,
                                                  const Im2ColGeometry& g, const Tensor& grad_bias) {
  if (grad_weight.is_meta()) return;
  profiler::note_route(profiler::Route::Thin);
  dispatch_dtype<ThinTypes>(input.dtype(), "thin_conv2d_weight_gradient_through_max_pool", [&]<typename T>() {
    const bool records = holds_pool_records(indices);
    KILN_CHECK(records || !holds_channel_blocks(values),
               "thin_conv2d_weight_gradient_through_max_pool: pooled values in channel blocks need window records");
    const Shape pooled_sizes = nchw_sizes(grad_pooled);
    const std::int64_t grad_block = holds_channel_blocks(grad_pooled) ? grad_pooled.sizes()[4] : 0;
    const ThinPooledLayer layer{input.sizes()[0], input.sizes()[1], grad_weight.sizes()[0], g, grad_block,
                                pooled_sizes[2], pooled_sizes[3]};
    if (records && channel_lanes_take(layer) && channel_lanes_weight_gradient_threads(layer) >= threads_for_region()) {
      return channel_lanes_weight_gradient_through_max_pool<T>(
          layer, grad_weight.data_ptr<T>(), grad_bias.defined() ? grad_bias.data_ptr<T>() : nullptr,
          grad_pooled.data_ptr<T>(), indices.data_ptr<std::uint8_t>(), input.data_ptr<T>());
    }
    const PaddedImage padded(g);
    std::vector<std::int64_t> padded_position(static_cast<std::size_t>(g.out_h * g.out_w));
    for (std::int64_t i = 0; i < g.out_h * g.out_w; ++i) {
      padded_position[static_cast<std::size_t>(i)] = i / g.out_w * padded.row_width + i % g.out_w;
    }
    const PooledGradient<T> pooled{grad_pooled.data_ptr<T>(),
                                   grad_block,
                                   pooled_sizes[1],
                                   records ? nullptr : indices.data_ptr<std::int64_t>(),
                                   records ? indices.data_ptr<std::uint8_t>() : nullptr,
                                   values.data_ptr<T>(),
                                   pooled_sizes[3],
                                   pooled_sizes[2] * pooled_sizes[3],
                                   padded_position.data(),
                                   padded.row_width};
    thin_weight_gradient<T>(grad_weight, grad_bias, Tensor(), input, g, &pooled);
  });
}

void thin_conv2d_forward_relu_max_pool(const Tensor& values, const Tensor& indices, const Tensor& input,
                                       const Tensor& weight, const Tensor& bias, const Im2ColGeometry& g,
                                       const Im2ColGeometry& pool) {
  KILN_CHECK(pools_whole_2x2_windows(pool), "thin_conv2d_forward_relu_max_pool: needs a 2x2 max pool of stride 2");
  KILN_CHECK(!holds_channel_blocks(values) || weight.sizes()[0] % values.sizes()[4] == 0,
             "thin_conv2d_forward_relu_max_pool: values in channel blocks of ", values.sizes()[4], " for ",
             weight.sizes()[0], " channels");
  if (values.is_meta()) return;
  profiler::note_route(profiler::Route::Thin);
  dispatch_dtype<ThinTypes>(input.dtype(), "thin_conv2d_forward_relu_max_pool", [&]<typename T>() {
    const bool records = holds_pool_records(indices);
    const PooledOutput<T> pooled{values.data_ptr<T>(), holds_channel_blocks(values) ? values.sizes()[4] : 0,
                                 weight.sizes()[0], records ? nullptr : indices.data_ptr<std::int64_t>(),
                                 records ? indices.data_ptr<std::uint8_t>() : nullptr, pool.out_h, pool.out_w};
    const ThinPooledLayer layer{input.sizes()[0], input.sizes()[1], weight.sizes()[0], g, pooled.values_block,
                                pool.out_h, pool.out_w};
    if (records && channel_lanes_take(layer)) {
      std::vector<float> wide_weight, wide_bias;
      return channel_lanes_forward_relu_max_pool<T>(layer, pooled.values, pooled.records, input.data_ptr<T>(),
                                                    as_float<T>(weight, wide_weight), as_float<T>(bias, wide_bias));
    }
    thin_forward<T>(Tensor(), input, weight, bias, g, /*relu=*/true, &pooled);
  });
}

}  // namespace kiln::cpu
