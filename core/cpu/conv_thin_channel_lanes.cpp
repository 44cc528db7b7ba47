// core/cpu/conv_thin_channel_lanes.cpp — the thin convolution's pooled forward and its weight
// gradient through the pool, with 16 (AVX-512) or 8 output channels in the lanes of a vector
// and one output pixel at a time, for a pooled side in channel blocks (Note [Output channels
// in lanes]). conv_thin.cpp's kernels, which hold output columns in lanes, stay the route for
// everything else, and define the bits these reproduce.
// Read next: core/cpu/conv_thin.cpp (the kernels these reproduce), core/cpu/pool_record.h.
#include "core/cpu/conv_thin_channel_lanes.h"

#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "core/cpu/block_lanes.h"
#include "core/cpu/channel_blocks.h"
#include "core/cpu/parallel.h"
#include "core/cpu/pool_record.h"
#include "core/cpu/select.h"
#include "core/cpu/thin_planes.h"
#include "core/cpu/transpose_tiles.h"
#include "core/half.h"

namespace kiln::cpu {

// Note [Output channels in lanes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// conv_thin.cpp computes a first layer (1 input channel, 32 output channels, 28x28) with eight
// output columns in the lanes of a vector: each output row is a few chunks of columns, which
// then have to be paired up for the pool, rounded, and written one channel plane at a time
// into the next layer's channel blocks (nChw16c: a plane's values 16 elements apart); its
// weight gradient first builds each channel's unpooled gradient plane, three quarters zeros,
// from the pooled gradient read 16 elements apart. Those passes around the arithmetic took
// about twice the arithmetic's time in train_cnn's compiled step (perf: thin_forward's loop
// 4.5 % of the step against forward_rows' 2.8 %; thin_weight_gradient's 6.8 % against
// accumulate_taps' 3.3 %).
//
// When the pooled side lies in channel blocks, a block's channels at one pixel are side by
// side, so a vector can hold output channels instead of columns. The forward computes a pool
// window's four cells for 16 (or 32) channels at once, each tap a broadcast input times a
// vector of weights; pools the cells in registers; and stores the window's values as one
// contiguous run where the next layer reads them. The weight gradient reads a window's pooled
// gradient as one vector and makes the window's four cell gradients from its record once; a
// pixel then loads its cell's and adds cell-gradient times broadcast input into one
// accumulator per tap. Records stay [N, C, ph, pw]
// (what every other kernel reads); each image's are transposed through a small buffer. In the
// compiled CNN step on a Zen 4 (AVX-512, 2 threads; profiler medians over 30 steps, both routes
// in one process) the forward took 0.68 ms instead of 1.03 in BFloat16 and 0.51 instead of 0.93
// in Float32, the weight gradient 0.69 instead of 1.33 and 0.84 instead of 1.44.
//
// Same bits: every output channel's value goes through the same float operations in the same
// order as in conv_thin.cpp. The forward's sum starts at 0 + bias and adds weight times input
// over (channel, row, column) of the kernel. The weight gradient's lanes there are output
// columns x ≡ l (mod 8): tap t's lane l adds dy · x over rows, then chunks; the lanes are
// summed in order into the image's float sum, and the images in double. Here the pixels are
// visited in that order (for each l, rows, then columns l, l + 8, ...), so each tap's running
// float sum is the column-lane's sum, and the image's float sum adds the eight in order; the bias
// keeps plane_sum's rows of lane sums the same way. The one difference: conv_thin.cpp's lanes
// also cover the padding columns that round a row up to whole chunks, where dy is 0; a 0 · x
// there adds nothing unless x is infinite or NaN (then the old kernel made a NaN that PyTorch
// does not: those columns are not pixels). tests/compile/test_channel_blocks.cpp checks the bits.

namespace {

#ifdef __AVX512F__
constexpr std::int64_t kChannelLanes = 16;
#else
constexpr std::int64_t kChannelLanes = 8;
#endif
using Channels = float __attribute__((vector_size(kChannelLanes * sizeof(float))));
using ChannelBits = std::uint32_t __attribute__((vector_size(kChannelLanes * sizeof(float))));
using ChannelHalves = std::uint16_t __attribute__((vector_size(kChannelLanes * sizeof(std::uint16_t))));
using ChannelBytes = std::uint8_t __attribute__((vector_size(kChannelLanes)));

/// conv_thin.cpp's chunk of output columns, whose lanes the weight gradient's sums follow.
constexpr std::int64_t kColumnLanes = thin::kLanes;

/// Stores values that are already T's (stored_relu made them).
template <class T>
void store_channels(T* p, Channels v) {
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(p, &v, sizeof(v));
  } else {
    const ChannelHalves halves = __builtin_convertvector(std::bit_cast<ChannelBits>(v) >> 16, ChannelHalves);
    std::memcpy(static_cast<void*>(p), &halves, sizeof(halves));
  }
}

/// relu, then the value as stored in T, back in float: pool_row_pairs' `stored`, lane by lane
/// (round_to_bfloat16's rounding and NaN).
template <class T>
Channels stored_relu(Channels v) {
  v = v < Channels{} ? Channels{} : v;
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    // round_to_bfloat16's bits kept in the upper half, where the float reads them: the same
    // rounding and NaN, with no shift down and back up (this runs four times a window).
    const ChannelBits u = std::bit_cast<ChannelBits>(v);
    const ChannelBits rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    const ChannelBits quiet_nan = (u & 0x80000000u) | 0x7fc00000u;
    return std::bit_cast<Channels>(v != v ? quiet_nan : rounded);
  }
}

#ifdef __AVX512BF16__
// Note [BFloat16 taps in pairs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under autocast a first layer's inputs, weights and gradients are BFloat16, and the kernels
// above widen them and add one product per FMA. AVX512_BF16's vdpbf16ps takes a pair of
// BFloat16 products per float lane: it adds the product of the pair's odd halves, then of its
// even halves, each an FMA rounded to nearest (on the Zen 4 here, 1.6 million lanes of random
// pairs and accumulators equal two fmaf in that order, and differ from the other order or one
// rounding). A product of two BFloat16 is exact in float, so putting one term of a sum in the
// odd half and the next term in the even half adds the same two FMAs as the float kernel, in
// half the instructions: the forward pairs consecutive taps (the weights of two taps against
// the inputs under them), the weight gradient consecutive pixels of a column lane (two cells'
// gradients against the inputs under them, the columns l and l + 8 side by side in one
// "pair image" of the input). A term without a partner takes a zero one: + 0 · 0 changes no
// sum. The instruction treats denormal floats as zero, in and out (as oneDNN's BFloat16
// convolutions do): for sums or products below 1.2e-38 the bits can differ from the float
// kernels'; elsewhere they are the same (tests/compile/test_channel_blocks.cpp). In the
// compiled BFloat16 CNN step (Zen 4, one process, 30 steps each way) conv1's forward took
// 0.59 ms instead of 0.73 and its weight gradient 0.61 instead of 0.73, the step 9.74 instead
// of 9.99 ms.
constexpr bool kBFloat16Pairs = true;

/// Two BFloat16 values in one lane: `odd`'s in the upper half (added first), `even`'s in the
/// lower, from floats that hold BFloat16 values (their lower halves are zero).
std::uint32_t bfloat16_pair(float odd, float even) {
  return std::bit_cast<std::uint32_t>(odd) | std::bit_cast<std::uint32_t>(even) >> 16;
}
ChannelBits bfloat16_pairs(Channels odd, Channels even) {
  return std::bit_cast<ChannelBits>(odd) | std::bit_cast<ChannelBits>(even) >> 16;
}

/// acc + (odd products) + (even products), lane by lane: `pairs` against the one pair `value`.
Channels add_pair_products(Channels acc, ChannelBits pairs, std::uint32_t value) {
  return std::bit_cast<Channels>(_mm512_dpbf16_ps(std::bit_cast<__m512>(acc), std::bit_cast<__m512bh>(pairs),
                                                  std::bit_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(value)))));
}
#else
constexpr bool kBFloat16Pairs = false;
#endif

#ifdef __AVX512BF16__
// Note [A BFloat16 window pooled in halves]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With the products in pairs the forward's arithmetic is a fifth of its time; the rest was the
// window's epilogue, lane by lane in float: relu, round_to_bfloat16 on the bits (seven
// operations a cell), pool_row_pairs' comparisons, then a narrowing store. For two groups (32
// channels) pool_window_as_bfloat16 does it on BFloat16 halves instead, 32 channels a vector:
// - relu is max(+0, v), which returns v for a NaN or a zero of either sign, as v < 0 ? 0 : v;
// - vcvtne2ps2bf16 rounds both groups' cells to nearest even in one instruction. Checked here on
//   64 million floats: the bits of round_to_bfloat16 except for a NaN, whose payload it keeps
//   (the NaN's quiet form of its sign is put back), and a denormal input, which it reads as
//   zero; vdpbf16ps never leaves a denormal sum (Note [BFloat16 taps in pairs]);
// - the comparisons are on the halves without their sign bit, as unsigned integers: for values
//   that relu let out (+0, -0, positive, +inf, NaN) that orders them as floats do, with -0 and
//   +0 equal, and every quiet NaN is 0x7fc0, above every number and equal to any other NaN. So
//   pool_row_pairs' "b wins if !(b <= a) and a is not NaN" is one unsigned compare, b > a: the
//   first maximum and the first NaN win.
// On the Zen 4 here this took conv1's forward in the compiled BFloat16 CNN step from 0.58 ms to
// 0.49 (profiler medians over 40 steps, the two builds in turn); the pooled values and records
// are the float epilogue's bytes (tests/compile/test_channel_blocks.cpp).
void pool_window_as_bfloat16(const Channels (&acc)[4][2], Eigen::bfloat16* group0, Eigen::bfloat16* group1,
                             std::uint8_t* records) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i magnitude = _mm512_set1_epi16(0x7fff), infinity = _mm512_set1_epi16(0x7f80);
  __m512i cells[4], keys[4];
  for (int cell = 0; cell < 4; ++cell) {
    const __m512 low = _mm512_max_ps(zero, std::bit_cast<__m512>(acc[cell][0]));
    const __m512 high = _mm512_max_ps(zero, std::bit_cast<__m512>(acc[cell][1]));
    const __m512i halves = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low));
    const __mmask32 nan = _mm512_cmpgt_epu16_mask(_mm512_and_si512(halves, magnitude), infinity);
    const __m512i quiet_nan = _mm512_or_si512(_mm512_andnot_si512(magnitude, halves), _mm512_set1_epi16(0x7fc0));
    cells[cell] = _mm512_mask_mov_epi16(halves, nan, quiet_nan);
    keys[cell] = _mm512_and_si512(cells[cell], magnitude);
  }
  // Whether b takes over from a: !(b <= a) && a == a, which on the keys is b > a (a NaN's key,
  // 0x7fc0 whatever its sign, is the largest, so no key is above it).
  const auto takes = [](__m512i b, __m512i a) { return _mm512_cmpgt_epu16_mask(b, a); };
  const __mmask32 right_top = takes(keys[1], keys[0]), right_bottom = takes(keys[3], keys[2]);
  const __m512i top_key = _mm512_mask_mov_epi16(keys[0], right_top, keys[1]);
  const __m512i bottom_key = _mm512_mask_mov_epi16(keys[2], right_bottom, keys[3]);
  const __mmask32 take_bottom = takes(bottom_key, top_key);
  const __m512i top = _mm512_mask_mov_epi16(cells[0], right_top, cells[1]);
  const __m512i bottom = _mm512_mask_mov_epi16(cells[2], right_bottom, cells[3]);
  const __m512i best = _mm512_mask_mov_epi16(top, take_bottom, bottom);
  const __mmask32 right = (take_bottom & right_bottom) | (~take_bottom & right_top);
  const __mmask32 passes = _mm512_cmpgt_epu16_mask(_mm512_mask_mov_epi16(top_key, take_bottom, bottom_key), _mm512_setzero_si512());
  const __m512i record = _mm512_or_si512(_mm512_or_si512(_mm512_maskz_set1_epi16(right, 1), _mm512_maskz_set1_epi16(take_bottom, 2)),
                                         _mm512_maskz_set1_epi16(passes, 4));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(records), _mm512_cvtepi16_epi8(record));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(group0), _mm512_castsi512_si256(best));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(group1), _mm512_extracti64x4_epi64(best, 1));
}
#endif

/// Whether T's kernels add BFloat16 products in pairs (Note [BFloat16 taps in pairs]).
template <class T>
constexpr bool pairs_products = kBFloat16Pairs && std::is_same_v<T, Eigen::bfloat16> && kChannelLanes == 16;

/// The weights [O, C, 3, 3] as one vector of kChannelLanes output channels per (group, tap).
std::vector<Channels> weights_in_lanes(const float* weight, std::int64_t output_channels, std::int64_t taps) {
  std::vector<Channels> lanes(static_cast<std::size_t>(output_channels / kChannelLanes * taps));
  for (std::int64_t o = 0; o < output_channels; ++o) {
    for (std::int64_t t = 0; t < taps; ++t) lanes[static_cast<std::size_t>(o / kChannelLanes * taps + t)][o % kChannelLanes] = weight[o * taps + t];
  }
  return lanes;
}

/// The unpooled gradient plane of a group's lanes, as unpool_plane makes it: each window's
/// gradient in the cell its record names if relu let it through, 0 in its other cells. Made
/// once an image, so that a pixel's gradient is one load at its own position; the cells no
/// window covers (an odd last row or column) are never written and stay the 0 they start as.
template <class T>
void cell_gradients(const std::uint8_t* window_records, const T* grad, const ThinPooledLayer& layer,
                    std::int64_t width, Channels* plane) {
  for (std::int64_t py = 0, w = 0; py < layer.pool_h; ++py) {
    for (std::int64_t px = 0; px < layer.pool_w; ++px, ++w) {
      const auto record = std::bit_cast<ChannelBits>(widen_lane_bytes<float, kChannelLanes>(window_records + w * kChannelLanes));
      const Channels passed = (record & 4u) != 0u ? load_lanes<kChannelLanes>(grad + w * layer.block) : Channels{};
      Channels* top = plane + 2 * py * width + 2 * px;
      for (std::uint32_t cell = 0; cell < 4; ++cell) {
        top[cell / 2 * width + cell % 2] = (record & 3u) == cell ? passed : Channels{};
      }
    }
  }
}

/// Where channel `channel` of image n begins in the pooled side, whose windows follow `block` apart.
template <class T>
T* pooled_run(T* base, const ThinPooledLayer& layer, std::int64_t n, std::int64_t channel) {
  const std::int64_t windows = layer.pool_h * layer.pool_w;
  return base + plane_start(n * layer.output_channels + channel, layer.output_channels, windows, layer.block).offset;
}

template <class T, int C, int G>
void forward_pooled(const ThinPooledLayer& layer, T* values, std::uint8_t* records, const T* input,
                    const std::vector<Channels>& weights, const std::vector<Channels>& biases) {
  constexpr int kTaps = C * 9;
  const Im2ColGeometry& g = layer.conv;
  const thin::PaddedImage padded(g);
  const std::int64_t plane_in = padded.in_height * padded.in_width, row = padded.in_width;
  const std::int64_t O = layer.output_channels, windows = layer.pool_h * layer.pool_w;
  // With BFloat16 pairs: each pair of taps' weights, and per image each pair of taps' inputs
  // under every pooled cell (the tap's input in the upper half, the next tap's in the lower).
  constexpr int kTapPairs = (kTaps + 1) / 2;
  const std::int64_t cells_w = 2 * layer.pool_w, cells = 2 * layer.pool_h * cells_w;
  std::vector<ChannelBits> weight_pairs;
  if constexpr (pairs_products<T>) {
#ifdef __AVX512BF16__
    weight_pairs.resize(static_cast<std::size_t>(O / kChannelLanes * kTapPairs));
    for (std::int64_t group = 0; group < O / kChannelLanes; ++group) {
      for (int k = 0; k < kTapPairs; ++k) {
        const Channels odd = weights[static_cast<std::size_t>(group * kTaps + 2 * k)];
        const Channels even = 2 * k + 1 < kTaps ? weights[static_cast<std::size_t>(group * kTaps + 2 * k + 1)] : Channels{};
        weight_pairs[static_cast<std::size_t>(group * kTapPairs + k)] = bfloat16_pairs(odd, even);
      }
    }
#endif
  }
  parallel_for(0, layer.images, 1, [&](std::int64_t n_begin, std::int64_t n_end) {
    std::vector<float> image(static_cast<std::size_t>(C * plane_in));
    std::vector<std::uint8_t> window_records(static_cast<std::size_t>(windows * O));
    std::vector<std::uint32_t> tap_pairs(pairs_products<T> ? static_cast<std::size_t>(kTapPairs * cells) : 0);
    for (std::int64_t n = n_begin; n < n_end; ++n) {
      padded.pad_image(input + n * C * g.height * g.width, C, g, image.data());
      if constexpr (pairs_products<T>) {
#ifdef __AVX512BF16__
        const auto input_at = [&](int t, std::int64_t y, std::int64_t x) {
          const int c = t / 9, i = t % 9 / 3, j = t % 3;
          return image[static_cast<std::size_t>(c * plane_in + (y * g.stride_h + i * g.dilation_h) * row + x + j * g.dilation_w)];
        };
        for (int k = 0; k < kTapPairs; ++k) {
          for (std::int64_t y = 0; y < 2 * layer.pool_h; ++y) {
            std::uint32_t* out = tap_pairs.data() + k * cells + y * cells_w;
            for (std::int64_t x = 0; x < cells_w; ++x) {
              out[x] = bfloat16_pair(input_at(2 * k, y, x), 2 * k + 1 < kTaps ? input_at(2 * k + 1, y, x) : 0.0f);
            }
          }
        }
#endif
      }
      for (std::int64_t group = 0; group < O / kChannelLanes; group += G) {
        T* out[G];
        for (int gi = 0; gi < G; ++gi) out[gi] = pooled_run(values, layer, n, (group + gi) * kChannelLanes);
        const Channels* w = weights.data() + group * kTaps;
        for (std::int64_t py = 0; py < layer.pool_h; ++py) {
          for (std::int64_t px = 0; px < layer.pool_w; ++px) {
            // Cells in pool_row_pairs' order: upper left, upper right, lower left, lower right.
            Channels acc[4][G];
            for (auto& cell : acc) {
              for (int gi = 0; gi < G; ++gi) cell[gi] = Channels{} + biases[static_cast<std::size_t>(group + gi)];
            }
            if constexpr (pairs_products<T>) {
#ifdef __AVX512BF16__
              // Tap pairs k = (2k, 2k + 1) in the float kernel's order (Note [BFloat16 taps in pairs]).
              const std::uint32_t* at = tap_pairs.data() + 2 * py * cells_w + 2 * px;
              for (int k = 0; k < kTapPairs; ++k) {
                for (int cell = 0; cell < 4; ++cell) {
                  const std::uint32_t v = at[k * cells + (cell / 2) * cells_w + cell % 2];
                  for (int gi = 0; gi < G; ++gi) {
                    acc[cell][gi] = add_pair_products(acc[cell][gi], weight_pairs[static_cast<std::size_t>((group + gi) * kTapPairs + k)], v);
                  }
                }
              }
#endif
            } else {
              const float* corner = image.data() + 2 * py * g.stride_h * row + 2 * px;
              for (int c = 0; c < C; ++c) {
                for (int i = 0; i < 3; ++i) {
                  for (int j = 0; j < 3; ++j) {
                    const float* tap = corner + c * plane_in + i * g.dilation_h * row + j * g.dilation_w;
                    for (int cell = 0; cell < 4; ++cell) {
                      const float v = tap[(cell / 2) * g.stride_h * row + cell % 2];
                      for (int gi = 0; gi < G; ++gi) acc[cell][gi] += w[gi * kTaps + c * 9 + i * 3 + j] * v;
                    }
                  }
                }
              }
            }
            const std::int64_t window = py * layer.pool_w + px;
            if constexpr (pairs_products<T> && G == 2) {
#ifdef __AVX512BF16__
              pool_window_as_bfloat16(acc, out[0] + window * layer.block, out[1] + window * layer.block,
                                      window_records.data() + window * O + group * kChannelLanes);
              continue;
#endif
            }
            for (int gi = 0; gi < G; ++gi) {
              // pool_row_pairs' comparisons: the first maximum and the first NaN win.
              const Channels t0 = stored_relu<T>(acc[0][gi]), t1 = stored_relu<T>(acc[1][gi]);
              const Channels b0 = stored_relu<T>(acc[2][gi]), b1 = stored_relu<T>(acc[3][gi]);
              const auto right_top = ~(t1 <= t0) & (t0 == t0), right_bottom = ~(b1 <= b0) & (b0 == b0);
              const Channels top_max = right_top ? t1 : t0, bottom_max = right_bottom ? b1 : b0;
              const auto take_bottom = ~(bottom_max <= top_max) & (top_max == top_max);
              const Channels best = take_bottom ? bottom_max : top_max;
              const auto right = take_bottom ? right_bottom : right_top;
              const auto passes = ~(best <= Channels{});
              store_channels(out[gi] + window * layer.block, best);
              const ChannelBytes record = __builtin_convertvector((right & 1) | (take_bottom & 2) | (passes & 4), ChannelBytes);
              std::memcpy(window_records.data() + window * O + (group + gi) * kChannelLanes, &record, sizeof(record));
            }
          }
        }
      }
      transpose(window_records.data(), O, windows, O, records + n * O * windows, windows);
    }
  });
}

template <class T, int C>
void weight_gradient_pooled(const ThinPooledLayer& layer, T* grad_weight, T* grad_bias, const T* grad_pooled,
                            const std::uint8_t* records, const T* input) {
  constexpr int kTaps = C * 9;
  const Im2ColGeometry& g = layer.conv;
  const thin::PaddedImage padded(g);
  const std::int64_t plane_in = padded.in_height * padded.in_width, row = padded.in_width;
  const std::int64_t O = layer.output_channels, windows = layer.pool_h * layer.pool_w;
  // Each group's sums run over the images in order, as each channel's do in conv_thin.cpp.
  parallel_for(0, O / kChannelLanes, 1, [&](std::int64_t group_begin, std::int64_t group_end) {
    std::vector<float> image(static_cast<std::size_t>(C * plane_in));
    std::vector<std::uint8_t> window_records(static_cast<std::size_t>(windows * kChannelLanes));
    std::vector<Channels> cell_plane(static_cast<std::size_t>(g.out_h * g.out_w));
    std::vector<Channels> row_lanes(static_cast<std::size_t>(g.out_h * kColumnLanes));
    std::vector<std::uint32_t> column_pairs(pairs_products<T> ? image.size() : 0), image_bits(column_pairs.size());
    for (std::int64_t group = group_begin; group < group_end; ++group) {
      const std::int64_t first = group * kChannelLanes;
      std::vector<double> weight_sums(static_cast<std::size_t>(kTaps * kChannelLanes), 0.0);
      std::vector<double> bias_sums(static_cast<std::size_t>(kChannelLanes), 0.0);
      for (std::int64_t n = 0; n < layer.images; ++n) {
        padded.pad_image(input + n * C * g.height * g.width, C, g, image.data());
        if constexpr (pairs_products<T>) {
#ifdef __AVX512BF16__
          // Each input with the one 8 columns right in its lower half, and alone.
          for (std::int64_t r = 0; r < C * padded.in_height; ++r) {
            const float* from = image.data() + r * row;
            std::uint32_t* pairs = column_pairs.data() + r * row;
            std::uint32_t* alone = image_bits.data() + r * row;
            for (std::int64_t col = 0; col < row; ++col) {
              pairs[col] = bfloat16_pair(from[col], col + kColumnLanes < row ? from[col + kColumnLanes] : 0.0f);
              alone[col] = std::bit_cast<std::uint32_t>(from[col]);
            }
          }
#endif
        }
        transpose(records + (n * O + first) * windows, windows, kChannelLanes, windows, window_records.data(),
                  kChannelLanes);
        cell_gradients(window_records.data(), pooled_run(grad_pooled, layer, n, first), layer, g.out_w,
                       cell_plane.data());
        Channels image_sums[kTaps] = {};
        for (std::int64_t lane = 0; lane < kColumnLanes; ++lane) {
          Channels acc[kTaps] = {};
          for (std::int64_t y = 0; y < g.out_h; ++y) {
            Channels row_sum{};
            const float* in_row = image.data() + y * g.stride_h * row;
            // unpool_plane's cell: the window's gradient if this cell won and relu passed it (a
            // -0 adds as the +0 there would: every sum starts at +0), else 0; cells no window
            // covers are 0.
            const Channels* cell_gradient = cell_plane.data() + y * g.out_w;
            if constexpr (pairs_products<T>) {
#ifdef __AVX512BF16__
              // Columns x and x + 8, one after the other in this lane, as one pair (Note
              // [BFloat16 taps in pairs]); a last column alone pairs with a zero.
              const std::uint32_t* pair_row = column_pairs.data() + y * g.stride_h * row;
              const std::uint32_t* single_row = image_bits.data() + y * g.stride_h * row;
              for (std::int64_t x = lane; x < g.out_w; x += 2 * kColumnLanes) {
                const bool pair = x + kColumnLanes < g.out_w;
                const Channels first = cell_gradient[x], second = pair ? cell_gradient[x + kColumnLanes] : Channels{};
                row_sum += first;
                if (pair) row_sum += second;
                const ChannelBits gradients = bfloat16_pairs(first, second);
                const std::uint32_t* inputs = (pair ? pair_row : single_row) + x;
                for (int c = 0; c < C; ++c) {
                  for (int i = 0; i < 3; ++i) {
                    const std::uint32_t* tap = inputs + c * plane_in + i * g.dilation_h * row;
                    for (int j = 0; j < 3; ++j) {
                      acc[c * 9 + i * 3 + j] = add_pair_products(acc[c * 9 + i * 3 + j], gradients, tap[j * g.dilation_w]);
                    }
                  }
                }
              }
#endif
            } else {
              for (std::int64_t x = lane; x < g.out_w; x += kColumnLanes) {
                const Channels d = cell_gradient[x];
                row_sum += d;
                for (int c = 0; c < C; ++c) {
                  for (int i = 0; i < 3; ++i) {
                    const float* tap = in_row + c * plane_in + i * g.dilation_h * row + x;
                    for (int j = 0; j < 3; ++j) acc[c * 9 + i * 3 + j] += d * tap[j * g.dilation_w];
                  }
                }
              }
            }
            row_lanes[static_cast<std::size_t>(y * kColumnLanes + lane)] = row_sum;
          }
          for (int t = 0; t < kTaps; ++t) image_sums[t] += acc[t];
        }
        for (int t = 0; t < kTaps; ++t) {
          for (std::int64_t l = 0; l < kChannelLanes; ++l) weight_sums[static_cast<std::size_t>(t * kChannelLanes + l)] += image_sums[t][l];
        }
        // plane_sum: each row's lanes in order in float, the rows in double, then the image.
        double plane[kChannelLanes] = {};
        for (std::int64_t y = 0; y < g.out_h; ++y) {
          Channels row_total{};
          for (std::int64_t lane = 0; lane < kColumnLanes; ++lane) row_total += row_lanes[static_cast<std::size_t>(y * kColumnLanes + lane)];
          for (std::int64_t l = 0; l < kChannelLanes; ++l) plane[l] += row_total[l];
        }
        for (std::int64_t l = 0; l < kChannelLanes; ++l) bias_sums[static_cast<std::size_t>(l)] += plane[l];
      }
      for (std::int64_t l = 0; l < kChannelLanes; ++l) {
        for (int t = 0; t < kTaps; ++t) {
          grad_weight[(first + l) * kTaps + t] = from_op_math<T>(static_cast<float>(weight_sums[static_cast<std::size_t>(t * kChannelLanes + l)]));
        }
        if (grad_bias != nullptr) grad_bias[first + l] = from_op_math<T>(static_cast<float>(bias_sums[static_cast<std::size_t>(l)]));
      }
    }
  });
}

}  // namespace

bool channel_lanes_take(const ThinPooledLayer& layer) {
  const Im2ColGeometry& g = layer.conv;
  return layer.block != 0 && layer.block % kChannelLanes == 0 && layer.output_channels % kChannelLanes == 0 &&
         g.kernel_h == 3 && g.kernel_w == 3 && g.stride_w == 1 &&
         (layer.input_channels == 1 || layer.input_channels == 3);
}

std::int64_t channel_lanes_weight_gradient_threads(const ThinPooledLayer& layer) {
  return layer.output_channels / kChannelLanes;
}

template <class T>
void channel_lanes_forward_relu_max_pool(const ThinPooledLayer& layer, T* values, std::uint8_t* records,
                                         const T* input, const float* weight, const float* bias) {
  const std::int64_t C = layer.input_channels, O = layer.output_channels;
  const std::vector<Channels> weights = weights_in_lanes(weight, O, C * 9);
  std::vector<float> zeros(static_cast<std::size_t>(O), 0.0f);
  const std::vector<Channels> biases = weights_in_lanes(bias != nullptr ? bias : zeros.data(), O, 1);
  // Two groups of channels per window where there are two: the window's inputs are loaded once
  // for both, and 8 independent sums hide the FMA's latency.
  const bool pairs = O / kChannelLanes % 2 == 0;
  if (C == 1) {
    (pairs ? &forward_pooled<T, 1, 2> : &forward_pooled<T, 1, 1>)(layer, values, records, input, weights, biases);
  } else {
    forward_pooled<T, 3, 1>(layer, values, records, input, weights, biases);
  }
}

template <class T>
void channel_lanes_weight_gradient_through_max_pool(const ThinPooledLayer& layer, T* grad_weight, T* grad_bias,
                                                    const T* grad_pooled, const std::uint8_t* records, const T* input) {
  (layer.input_channels == 1 ? &weight_gradient_pooled<T, 1> : &weight_gradient_pooled<T, 3>)(
      layer, grad_weight, grad_bias, grad_pooled, records, input);
}

template void channel_lanes_forward_relu_max_pool<float>(const ThinPooledLayer&, float*, std::uint8_t*, const float*,
                                                         const float*, const float*);
template void channel_lanes_forward_relu_max_pool<Eigen::bfloat16>(const ThinPooledLayer&, Eigen::bfloat16*,
                                                                   std::uint8_t*, const Eigen::bfloat16*,
                                                                   const float*, const float*);
template void channel_lanes_weight_gradient_through_max_pool<float>(const ThinPooledLayer&, float*, float*,
                                                                    const float*, const std::uint8_t*, const float*);
template void channel_lanes_weight_gradient_through_max_pool<Eigen::bfloat16>(const ThinPooledLayer&,
                                                                              Eigen::bfloat16*, Eigen::bfloat16*,
                                                                              const Eigen::bfloat16*,
                                                                              const std::uint8_t*,
                                                                              const Eigen::bfloat16*);

}  // namespace kiln::cpu
