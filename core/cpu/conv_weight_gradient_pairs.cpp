// core/cpu/conv_weight_gradient_pairs.cpp — a BFloat16 convolution's weight and bias gradients
// as sums of pair products (AVX512_BF16's vdpbf16ps), read from activations in channel blocks
// or in NCHW. See Note [A weight gradient in BFloat16 pairs].
// Read next: core/cpu/conv_routes.cpp and core/onednn/conv.cpp (the routes that call it).
#include "core/cpu/conv_weight_gradient_pairs.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

#include "core/backends.h"
#include "core/cpu/parallel.h"
#include "core/cpu/transpose_tiles.h"
#include "core/half.h"
#include "core/tensor.h"

namespace kiln::cpu {

// Note [A weight gradient in BFloat16 pairs]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A convolution's weight gradient is a product whose reduction runs over every output pixel of
// every image: dW[o, c, kh, kw] = Σ_(n, y, x) dY[n, o, y, x] · X[n, c, y + kh - pad_h,
// x + kw - pad_w]. In train_cnn's BFloat16 step, conv2's (32 -> 64 channels, 3x3, 14x14,
// batch 128) took oneDNN 2.6's primitive 2.6 ms on the Zen 4 here, against 1.9 ms for its
// forward of the same arithmetic, and no layout it offers did better (the thirteenth session's
// raw-oneDNN test); a third of the step's convolution time.
//
// vdpbf16ps adds, in each of 16 float lanes, the products of a pair of BFloat16 values with
// another pair: twice an FMA's work. Here a lane is an input channel and a pair is two
// neighbouring output columns x, x + 1: the input pair is the two pixels under them for tap
// (kh, kw), the gradient pair (dY at x, dY at x + 1) one output channel's, broadcast. So 16
// input channels of one tap gain two terms of their sums per instruction. Tap kw reads padded
// input columns (x + kw, x + kw + 1), which start on an even column for kw = 0 and 2 and an
// odd one for kw = 1: the input is packed twice, as pairs from even and from odd columns, zeros
// for the padding; a tap never takes a padded row (its rows are skipped instead). A tile keeps
// 4 output channels x 3 taps x 2 blocks of 16 input channels in 24 registers across a chunk of
// images, so each broadcast gradient pair feeds 6 instructions and each packed input pair 4.
//
// The packs of a chunk (at most 8 images, at most 512 KiB) are made by the thread that uses
// them, in its cache. A chunk's sums start from zero; up to 8 groups, runs of chunks that the
// sizes alone decide, each add their chunks' sums in order, and the groups' sums are added in
// order at the end: the result does not depend on the number of threads, and the buffers hold
// at most 8 copies of the weight. Each float sum runs over at most a chunk's pixels (8 · 14 ·
// 14 here), then over a group's chunks and the groups: Float32's error on sums far shorter than
// the whole batch, before the result is rounded to BFloat16. The bias gradient, Σ dY over the
// same pixels, is the gradient pairs times the pair (1, 1) as they are packed. vdpbf16ps treats
// denormal floats as zero, as oneDNN's BFloat16 kernels do; a tap over the padding adds 0 · dY,
// which is NaN only where dY is infinite or NaN (oneDNN skips those products; either way the
// gradient is not finite and GradScaler skips the step).
//
// Where it runs: the CPUs whose oneDNN runs BFloat16 on AVX512_BF16 (with AMX, oneDNN's
// tile kernels are faster), kernels 3 wide at unit stride and dilation, channel counts in
// whole blocks of 16, an even output width, images small enough that one's packs fit a chunk
// (larger ones would stream their packs through memory). The eager op and the compiled step's
// fused backward (core/onednn/conv.cpp) both take it, so both give the same bits.

#ifdef __AVX512BF16__
namespace {

constexpr std::int64_t kBlock = 16;          // input channels in a lane vector, and in a block
constexpr std::int64_t kKernelWidth = 3;     // taps a tile holds across a kernel row
constexpr std::int64_t kOutputsPerTile = 4;  // output channels a tile holds
constexpr std::int64_t kChunkBytes = 512 * 1024;  // a chunk's packs, in a thread's share of the L2 cache
constexpr std::int64_t kMaxImagesPerChunk = 8;
constexpr std::int64_t kGroups = 8;  // runs of chunks with a sum each, so at most 8 copies of the weight's sums

struct Sizes {
  std::int64_t images, channels, height, width, outputs, out_h, out_w, kernel_h, pad_h, pad_w;
  std::int64_t channel_blocks() const { return channels / kBlock; }
  std::int64_t output_blocks() const { return outputs / kBlock; }
  std::int64_t column_pairs() const { return out_w / 2; }
  std::int64_t even_pairs() const { return column_pairs() + 1; }  // padded columns (2j, 2j + 1)
  std::int64_t odd_pairs() const { return column_pairs(); }       // padded columns (2j + 1, 2j + 2)
  std::int64_t taps() const { return kernel_h * kKernelWidth; }
  /// One image's packs: its input rows twice, its dY once, 4 bytes a pair.
  std::int64_t packed_image_bytes() const {
    return (channel_blocks() * height * (even_pairs() + odd_pairs()) * kBlock + out_h * column_pairs() * outputs) * 4;
  }
};

/// One chunk of images, packed: each input row as pairs of its padded columns from even and from
/// odd columns ([image][channel block][row][pair], 16 channel lanes each), and dY as pairs of
/// neighbouring columns ([image][out row][pair][output channel]).
struct Packs {
  std::vector<std::uint32_t> even, odd, gradient;  // pairs of BFloat16, kBlock to a vector
  std::vector<Eigen::bfloat16> plane;              // a block of an NCHW activation, in a channel block
  std::vector<float> bias;                         // the chunk's bias sums, one per output channel
};

/// `words` 32-bit words from a 64-byte boundary of `storage`, so that each vector of pairs is one cache line.
std::uint32_t* vectors_in(std::vector<std::uint32_t>& storage, std::int64_t words) {
  storage.resize(static_cast<std::size_t>(words + kBlock));
  const auto at = reinterpret_cast<std::uintptr_t>(storage.data());
  return reinterpret_cast<std::uint32_t*>((at + 63) & ~std::uintptr_t{63});
}

/// Where a chunk's packs lie.
struct PackedChunk {
  std::uint32_t *even, *odd, *gradient;
};

/// Where the 16 channels of block `cb` of image `n` start, and the steps between rows and columns.
struct BlockPlane {
  const Eigen::bfloat16* data;
  std::int64_t row, column;
};

/// Block `cb` of image `n` of an activation with `channels`, `height` x `width`: read where it
/// lies in channel blocks, or transposed from NCHW into `scratch`.
BlockPlane block_plane(const Eigen::bfloat16* data, const ChannelBlockedLayout& layout, std::int64_t n,
                       std::int64_t cb, std::int64_t channels, std::int64_t height, std::int64_t width,
                       std::vector<Eigen::bfloat16>& scratch) {
  if (layout.block == kBlock) {
    return {data + n * layout.stride_n + cb * layout.stride_block, layout.stride_h, layout.stride_w};
  }
  const std::int64_t plane = height * width;
  scratch.resize(static_cast<std::size_t>(plane * kBlock));
  transpose(data + (n * channels + cb * kBlock) * plane, plane, kBlock, plane, scratch.data(), kBlock);
  return {scratch.data(), kBlock * width, kBlock};
}

__m256i column_or_zero(const Eigen::bfloat16* row, std::int64_t column_step, std::int64_t column, std::int64_t width) {
  if (column < 0 || column >= width) return _mm256_setzero_si256();
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + column * column_step));
}

/// Lane l holds (first[l], second[l]): the lower half first, as both sides of a product pack it.
__m512i pair_columns(__m256i first, __m256i second) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
}

void pack_input_block(const BlockPlane& p, const Sizes& s, std::uint32_t* even, std::uint32_t* odd) {
  for (std::int64_t h = 0; h < s.height; ++h) {
    const Eigen::bfloat16* row = p.data + h * p.row;
    const auto column = [&](std::int64_t padded) { return column_or_zero(row, p.column, padded - s.pad_w, s.width); };
    for (std::int64_t j = 0; j < s.even_pairs(); ++j) {
      _mm512_store_si512(even + (h * s.even_pairs() + j) * kBlock, pair_columns(column(2 * j), column(2 * j + 1)));
    }
    for (std::int64_t j = 0; j < s.odd_pairs(); ++j) {
      _mm512_store_si512(odd + (h * s.odd_pairs() + j) * kBlock, pair_columns(column(2 * j + 1), column(2 * j + 2)));
    }
  }
}

/// Packs block `ob` of one image's dY and adds its values to the block's bias sums.
void pack_gradient_block(const BlockPlane& p, const Sizes& s, std::int64_t ob, std::uint32_t* gradient,
                         float* bias_sums) {
  __m512 bias = _mm512_loadu_ps(bias_sums);
  const __m512bh ones = std::bit_cast<__m512bh>(_mm512_set1_epi16(0x3f80));
  for (std::int64_t y = 0; y < s.out_h; ++y) {
    const Eigen::bfloat16* row = p.data + y * p.row;
    for (std::int64_t q = 0; q < s.column_pairs(); ++q) {
      const auto column = [&](std::int64_t x) {
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + x * p.column));
      };
      const __m512i pairs = pair_columns(column(2 * q), column(2 * q + 1));
      _mm512_storeu_si512(gradient + (y * s.column_pairs() + q) * s.outputs + ob * kBlock, pairs);
      bias = _mm512_dpbf16_ps(bias, std::bit_cast<__m512bh>(pairs), ones);
    }
  }
  _mm512_storeu_ps(bias_sums, bias);
}

/// The sums over a chunk's `images` of taps (kh, 0..2) for output channels o0..o0+3 and input
/// blocks [first_block, first_block + Blocks), written to `sums` ([tap][o][c] floats), or added
/// to what they hold.
template <int Blocks>
void accumulate_tile(const PackedChunk& packs, const Sizes& s, std::int64_t images, std::int64_t kh, std::int64_t o0,
                     std::int64_t first_block, float* sums, bool add) {
  __m512 acc[kOutputsPerTile][kKernelWidth][Blocks];
  for (auto& output : acc) {
    for (auto& tap : output) {
      for (__m512& a : tap) a = _mm512_setzero_ps();
    }
  }
  // Rows whose input row y + kh - pad_h lies inside the image: the others add only zeros.
  const std::int64_t first_row = std::max<std::int64_t>(0, s.pad_h - kh);
  const std::int64_t end_row = std::min(s.out_h, s.height + s.pad_h - kh);
  const std::int64_t pairs = s.column_pairs();
  for (std::int64_t image = 0; image < images; ++image) {
    for (std::int64_t y = first_row; y < end_row; ++y) {
      const std::int64_t input_row = y + kh - s.pad_h;
      const std::uint32_t* even[Blocks];
      const std::uint32_t* odd[Blocks];
      for (int b = 0; b < Blocks; ++b) {
        const std::int64_t row = (image * s.channel_blocks() + first_block + b) * s.height + input_row;
        even[b] = packs.even + row * s.even_pairs() * kBlock;
        odd[b] = packs.odd + row * s.odd_pairs() * kBlock;
      }
      const std::uint32_t* gradient = packs.gradient + (image * s.out_h + y) * pairs * s.outputs + o0;
      for (std::int64_t q = 0; q < pairs; ++q) {
        __m512bh input[kKernelWidth][Blocks];
        for (int b = 0; b < Blocks; ++b) {
          input[0][b] = std::bit_cast<__m512bh>(_mm512_load_si512(even[b] + q * kBlock));
          input[1][b] = std::bit_cast<__m512bh>(_mm512_load_si512(odd[b] + q * kBlock));
          input[2][b] = std::bit_cast<__m512bh>(_mm512_load_si512(even[b] + (q + 1) * kBlock));
        }
        for (std::int64_t i = 0; i < kOutputsPerTile; ++i) {
          const __m512bh dy = std::bit_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(gradient[q * s.outputs + i])));
          for (std::int64_t kw = 0; kw < kKernelWidth; ++kw) {
            for (int b = 0; b < Blocks; ++b) acc[i][kw][b] = _mm512_dpbf16_ps(acc[i][kw][b], input[kw][b], dy);
          }
        }
      }
    }
  }
  for (std::int64_t i = 0; i < kOutputsPerTile; ++i) {
    for (std::int64_t kw = 0; kw < kKernelWidth; ++kw) {
      for (int b = 0; b < Blocks; ++b) {
        float* at = sums + ((kh * kKernelWidth + kw) * s.outputs + o0 + i) * s.channels + (first_block + b) * kBlock;
        _mm512_storeu_ps(at, add ? _mm512_add_ps(_mm512_loadu_ps(at), acc[i][kw][b]) : acc[i][kw][b]);
      }
    }
  }
}

struct Activation {
  const Eigen::bfloat16* data;
  ChannelBlockedLayout layout;
};

/// Packs images [first, first + images) and writes their weight sums ([tap][o][c]) and bias
/// sums, or adds them to what those hold.
void chunk_sums(const Activation& input, const Activation& grad_output, const Sizes& s, std::int64_t first,
                std::int64_t images, float* weight_sums, float* bias_sums, bool add) {
  thread_local Packs packs;
  const std::int64_t input_rows = images * s.channel_blocks() * s.height;
  const PackedChunk packed{vectors_in(packs.even, input_rows * s.even_pairs() * kBlock),
                           vectors_in(packs.odd, input_rows * s.odd_pairs() * kBlock),
                           vectors_in(packs.gradient, images * s.out_h * s.column_pairs() * s.outputs)};
  packs.bias.assign(static_cast<std::size_t>(s.outputs), 0.0f);
  for (std::int64_t image = 0; image < images; ++image) {
    for (std::int64_t cb = 0; cb < s.channel_blocks(); ++cb) {
      const BlockPlane p =
          block_plane(input.data, input.layout, first + image, cb, s.channels, s.height, s.width, packs.plane);
      const std::int64_t row = (image * s.channel_blocks() + cb) * s.height;
      pack_input_block(p, s, packed.even + row * s.even_pairs() * kBlock,
                       packed.odd + row * s.odd_pairs() * kBlock);
    }
    for (std::int64_t ob = 0; ob < s.output_blocks(); ++ob) {
      const BlockPlane p = block_plane(grad_output.data, grad_output.layout, first + image, ob, s.outputs, s.out_h,
                                       s.out_w, packs.plane);
      pack_gradient_block(p, s, ob,
                          packed.gradient + image * s.out_h * s.column_pairs() * s.outputs,
                          packs.bias.data() + ob * kBlock);
    }
  }
  for (std::int64_t o = 0; o < s.outputs; ++o) {
    const float chunk_sum = packs.bias[static_cast<std::size_t>(o)];
    bias_sums[o] = add ? bias_sums[o] + chunk_sum : chunk_sum;
  }
  for (std::int64_t kh = 0; kh < s.kernel_h; ++kh) {
    for (std::int64_t o0 = 0; o0 < s.outputs; o0 += kOutputsPerTile) {
      std::int64_t cb = 0;
      for (; cb + 2 <= s.channel_blocks(); cb += 2) {
        accumulate_tile<2>(packed, s, images, kh, o0, cb, weight_sums, add);
      }
      if (cb < s.channel_blocks()) accumulate_tile<1>(packed, s, images, kh, o0, cb, weight_sums, add);
    }
  }
}

void weight_gradient(const Activation& input, const Activation& grad_output, const Sizes& s, Eigen::bfloat16* dw,
                     Eigen::bfloat16* db) {
  const std::int64_t chunk = std::min(kChunkBytes / s.packed_image_bytes(), kMaxImagesPerChunk);
  const std::int64_t chunks = (s.images + chunk - 1) / chunk;
  // Each group, a run of chunks fixed by the sizes alone, sums its chunks in order; the groups'
  // sums are added in order at the end: the same bits on any number of threads.
  const std::int64_t groups = std::min(chunks, kGroups);
  const std::int64_t weight_sums = s.taps() * s.outputs * s.channels;
  thread_local std::vector<float> sums;
  sums.resize(static_cast<std::size_t>(groups * (weight_sums + s.outputs)));
  float* const weight_at = sums.data();
  float* const bias_at = sums.data() + groups * weight_sums;
  parallel_for(0, groups, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t group = begin; group < end; ++group) {
      const std::int64_t first = group * chunks / groups, last = (group + 1) * chunks / groups;
      for (std::int64_t c = first; c < last; ++c) {
        chunk_sums(input, grad_output, s, c * chunk, std::min(chunk, s.images - c * chunk),
                   weight_at + group * weight_sums, bias_at + group * s.outputs, /*add=*/c > first);
      }
    }
  });
  // The groups' sums in order, [tap][o][c] -> [o][c][kh][kw], rounded to BFloat16.
  parallel_for(0, s.outputs, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
        for (std::int64_t c = 0; c < s.channels; c += kBlock) {
          const float* at = weight_at + (tap * s.outputs + o) * s.channels + c;
          __m512 total = _mm512_loadu_ps(at);
          for (std::int64_t k = 1; k < groups; ++k) total = _mm512_add_ps(total, _mm512_loadu_ps(at + k * weight_sums));
          alignas(64) float lanes[kBlock];
          _mm512_store_ps(lanes, total);
          for (std::int64_t l = 0; l < kBlock; ++l) {
            dw[(o * s.channels + c + l) * s.taps() + tap] = Eigen::bfloat16(lanes[l]);
          }
        }
      }
      if (db != nullptr) {
        float total = bias_at[o];
        for (std::int64_t k = 1; k < groups; ++k) total += bias_at[k * s.outputs + o];
        db[o] = Eigen::bfloat16(total);
      }
    }
  });
}

/// Whether oneDNN runs BFloat16 here on AVX512_BF16 alone, not on AMX, whose tile kernels beat these.
bool pairs_beat_onednn() {
  static const bool beat = backends::onednn_cpu_isa() != "avx512_core_amx";
  return beat;
}

/// Whether `t` holds a [n, c, h, w] BFloat16 activation at `layout` (block 16, or plain NCHW):
/// an image of c channels (not of a grouped convolution's c · groups).
bool lies_at(const Tensor& t, const ChannelBlockedLayout& layout, std::int64_t n, std::int64_t c, std::int64_t h,
             std::int64_t w) {
  if (t.dtype() != DType::BFloat16) return false;
  if (layout.block == kBlock) {
    return t.is_contiguous() && layout.stride_n == c * h * w && layout.elements <= t.numel();
  }
  return layout.block == 0 && t.is_contiguous() && t.sizes() == IntArrayRef({n, c, h, w});
}

}  // namespace
#endif

bool conv2d_weight_gradient_in_pairs(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_output,
                                     const ChannelBlockedLayout& grad_output_layout, const Tensor& input,
                                     const ChannelBlockedLayout& input_layout, const Im2ColGeometry& g) {
#ifdef __AVX512BF16__
  if (!pairs_beat_onednn() || grad_weight.dim() != 4 || grad_weight.dtype() != DType::BFloat16 ||
      !grad_weight.is_contiguous()) {
    return false;
  }
  const Sizes s{.images = input.sizes()[0], .channels = grad_weight.sizes()[1], .height = g.height, .width = g.width,
                .outputs = grad_weight.sizes()[0], .out_h = g.out_h, .out_w = g.out_w, .kernel_h = g.kernel_h,
                .pad_h = g.pad_h, .pad_w = g.pad_w};
  const bool unit_steps = g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1;
  const bool geometry = unit_steps && g.kernel_w == kKernelWidth && grad_weight.sizes()[2] == g.kernel_h &&
                        grad_weight.sizes()[3] == kKernelWidth && s.out_h == s.height + 2 * s.pad_h - s.kernel_h + 1 &&
                        s.out_w == s.width + 2 * s.pad_w - kKernelWidth + 1 && s.out_w % 2 == 0 && s.out_w > 0 &&
                        s.out_h > 0 && s.images > 0 && s.channels % kBlock == 0 && s.outputs % kBlock == 0 &&
                        s.channels > 0 && s.outputs > 0 && s.packed_image_bytes() <= kChunkBytes;
  const bool bias = !grad_bias.defined() || (grad_bias.dtype() == DType::BFloat16 && grad_bias.is_contiguous() &&
                                             grad_bias.numel() == s.outputs);
  if (!geometry || !bias || !lies_at(input, input_layout, s.images, s.channels, s.height, s.width) ||
      !lies_at(grad_output, grad_output_layout, s.images, s.outputs, s.out_h, s.out_w)) {
    return false;
  }
  if (grad_weight.is_meta()) return true;
  weight_gradient({input.data_ptr<Eigen::bfloat16>(), input_layout},
                  {grad_output.data_ptr<Eigen::bfloat16>(), grad_output_layout}, s,
                  grad_weight.data_ptr<Eigen::bfloat16>(),
                  grad_bias.defined() ? grad_bias.data_ptr<Eigen::bfloat16>() : nullptr);
  return true;
#else
  (void)grad_weight, (void)grad_bias, (void)grad_output, (void)grad_output_layout, (void)input, (void)input_layout,
      (void)g;
  return false;
#endif
}

}  // namespace kiln::cpu
