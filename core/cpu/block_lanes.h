// core/cpu/block_lanes.h — the B channels of one pixel in a channel block (oneDNN's nChw16c
// and kin) as one vector of the type math on T runs in (OpMath<T>), loaded and stored back the
// way to_op_math and from_op_math do it element by element. Written in GCC's vector
// extensions, so the kernels that pool and unpool a block a pixel at a time say "this window's
// 16 channels" once and compile to one instruction per operation where the target has the
// registers (AVX-512 for 16 floats) and to a few where it has not.
// Read next: core/cpu/pool.cpp.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "core/half.h"

namespace kiln::cpu {

template <class M, int B>
struct VectorOf {
  // GCC takes vector_size on a dependent type in a typedef, not in an alias template.
  typedef M type __attribute__((vector_size(B * sizeof(M))));
};

/// B values of OpMath<T>, one per lane.
template <class T, int B>
using BlockLanes = typename VectorOf<OpMath<T>, B>::type;
/// What comparing two BlockLanes gives: per lane, all ones (true) or zero, as signed integers
/// of the lanes' width; also the integer lanes that masks select between.
template <class T, int B>
using BlockMask = decltype(BlockLanes<T, B>{} < BlockLanes<T, B>{});
/// B values of T as their bits (unsigned integers of T's size), for kernels that only move them.
template <class T, int B>
using BlockBits = typename VectorOf<
    std::conditional_t<sizeof(T) == 1, std::uint8_t,
                       std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                          std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>,
    B>::type;
/// B bytes, one per lane (a pool record per channel).
template <int B>
using BlockBytes = typename VectorOf<std::uint8_t, B>::type;

/// to_op_math on B consecutive values of T.
template <int B, class T>
BlockLanes<T, B> load_lanes(const T* p) {
  BlockLanes<T, B> v;
  if constexpr (std::is_same_v<T, OpMath<T>>) {
    std::memcpy(&v, p, sizeof(v));
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    typename VectorOf<std::uint16_t, B>::type halves;
    std::memcpy(&halves, p, sizeof(halves));
    v = std::bit_cast<BlockLanes<T, B>>(__builtin_convertvector(halves, typename VectorOf<std::uint32_t, B>::type) << 16);
  } else {
    for (int l = 0; l < B; ++l) v[l] = to_op_math(p[l]);
  }
  return v;
}

/// from_op_math on each lane into B consecutive values of T (for BFloat16, round_to_bfloat16's
/// rounding and quiet NaN, on all lanes at once).
template <int B, class T>
void store_lanes(T* p, const BlockLanes<T, B>& v) {
  if constexpr (std::is_same_v<T, OpMath<T>>) {
    std::memcpy(p, &v, sizeof(v));
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    using Bits = typename VectorOf<std::uint32_t, B>::type;
    const Bits u = std::bit_cast<Bits>(v);
    const Bits rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const Bits quiet_nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    const Bits bits = (u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
    const auto halves = __builtin_convertvector(bits, typename VectorOf<std::uint16_t, B>::type);
    std::memcpy(static_cast<void*>(p), &halves, sizeof(halves));
  } else {
    for (int l = 0; l < B; ++l) p[l] = from_op_math<T>(v[l]);
  }
}

/// The bits of from_op_math on each lane: store_lanes into registers.
template <int B, class T>
BlockBits<T, B> lanes_as_bits(const BlockLanes<T, B>& v) {
  T stored[B];
  store_lanes<B>(stored, v);
  BlockBits<T, B> bits;
  std::memcpy(&bits, stored, sizeof(bits));
  return bits;
}

/// B bytes as integer lanes of T's mask width (a record per lane, to test against masks). With
/// AVX one vpmovzxbd; GCC's __builtin_convertvector made a chain of scalar inserts of it.
template <class T, int B>
BlockMask<T, B> widen_lane_bytes(const std::uint8_t* p) {
  using Mask = BlockMask<T, B>;
#ifdef __AVX512F__
  if constexpr (B == 16 && sizeof(Mask) == 64) {
    return std::bit_cast<Mask>(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
#endif
#ifdef __AVX2__
  if constexpr (B == 8 && sizeof(Mask) == 32) {
    return std::bit_cast<Mask>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
#endif
  Mask lanes;
  for (int l = 0; l < B; ++l) lanes[l] = p[l];
  return lanes;
}

/// Integer lanes (each 0-255) as B bytes.
template <class T, int B>
void store_lane_bytes(std::uint8_t* p, const BlockMask<T, B>& lanes) {
  const BlockBytes<B> bytes = __builtin_convertvector(lanes, BlockBytes<B>);
  std::memcpy(p, &bytes, sizeof(bytes));
}

/// Whether any lane of the integer vector v is not zero: one test instruction where v is a
/// register, else its halves ORed together down to 8 bytes. A memcmp of a vector went through
/// the stack, and its 8-byte loads after the 64-byte store stalled on store forwarding (two
/// thirds of attention's live_columns).
template <class V>
bool any_lane_set(const V& v) {
  using E = std::remove_cvref_t<decltype(v[0])>;
#ifdef __AVX512F__
  if constexpr (sizeof(V) == 64) {
    const auto bits = std::bit_cast<__m512i>(v);
    return _mm512_test_epi64_mask(bits, bits) != 0;
  }
#endif
#ifdef __AVX2__
  if constexpr (sizeof(V) == 32) {
    const auto bits = std::bit_cast<__m256i>(v);
    return _mm256_testz_si256(bits, bits) == 0;
  }
#endif
  if constexpr (sizeof(V) <= sizeof(std::uint64_t)) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(V));
    return bits != 0;
  } else {
    using Half = typename VectorOf<E, static_cast<int>(sizeof(V) / sizeof(E) / 2)>::type;
    Half low, high;
    std::memcpy(&low, &v, sizeof(Half));
    std::memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof(Half), sizeof(Half));
    return any_lane_set(low | high);
  }
}

}  // namespace kiln::cpu
