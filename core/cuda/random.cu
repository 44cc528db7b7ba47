// core/cuda/random.cu — random numbers on the GPU from Philox4x32-10, a counter-based
// generator (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11, the
// generator behind cuRAND's and PyTorch's CUDA streams): element i of a fill draws from
// counter (offset + i / 4, ...) under key `seed`, so values depend only on (seed, offset, i),
// never on the launch configuration. Streams differ from PyTorch's CUDA generator (which
// consumes its counter differently) and from Kiln's CPU stream; manual_seed makes them
// reproducible run to run.
// Read next: core/cuda/optim.cu.
#include "core/cuda/loops.cuh"

namespace kiln::cuda {

namespace {

struct Philox {
  uint4 counter;
  uint2 key;

  __device__ static inline void round(uint4& c, uint2 k) {
    constexpr unsigned int kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    const unsigned int hi0 = __umulhi(kMul0, c.x), lo0 = kMul0 * c.x;
    const unsigned int hi1 = __umulhi(kMul1, c.z), lo1 = kMul1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
  }

  /// Four 32-bit outputs for the current counter.
  __device__ uint4 operator()() const {
    constexpr unsigned int kBump0 = 0x9E3779B9u, kBump1 = 0xBB67AE85u;
    uint4 c = counter;
    uint2 k = key;
    for (int r = 0; r < 10; ++r) {
      round(c, k);
      k.x += kBump0;
      k.y += kBump1;
    }
    return c;
  }
};

/// A uniform in [0, 1) with `digits` random bits (24 for float, 53 for double, the type's
/// mantissa for half types, so rounding to T can never produce 1).
template <int Digits>
__device__ inline double to_unit(unsigned int hi, unsigned int lo) {
  const unsigned long long bits = (static_cast<unsigned long long>(hi) << 32 | lo) >> (64 - Digits);
  return static_cast<double>(bits) * (1.0 / static_cast<double>(1ULL << Digits));
}

template <class T>
inline constexpr int kUniformDigits = std::is_same_v<T, double> ? 53
                                      : std::is_same_v<T, __half> ? 11
                                      : std::is_same_v<T, __nv_bfloat16> ? 8
                                                                          : 24;

/// Each group of four elements draws eight 32-bit words (two Philox blocks): element j uses
/// words 2j and 2j+1, so no two elements share random bits.
template <class T>
__global__ void random_kernel(T* out, std::int64_t n, RandomKind kind, double a, double b, unsigned long long seed,
                              unsigned long long offset) {
  constexpr double kTwoPi = 6.28318530717958647692;
  const std::int64_t groups = (n + 3) / 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const uint2 key = make_uint2(static_cast<unsigned int>(seed), static_cast<unsigned int>(seed >> 32));
  for (std::int64_t g = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) {
    const unsigned long long c = offset + static_cast<unsigned long long>(g);
    const unsigned int c0 = static_cast<unsigned int>(c), c1 = static_cast<unsigned int>(c >> 32);
    const uint4 r0 = Philox{make_uint4(c0, c1, 0u, 0u), key}();
    const uint4 r1 = Philox{make_uint4(c0, c1, 1u, 0u), key}();
    const unsigned int w[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
    double values[4];
    for (int j = 0; j < 4; ++j) {
      switch (kind) {
        case RandomKind::Uniform:
          values[j] = to_unit<kUniformDigits<T>>(w[2 * j], w[2 * j + 1]) * (b - a) + a;
          break;
        case RandomKind::Normal: {
          // Box-Muller: elements (0, 1) and (2, 3) are the cos/sin pair of one (u1, u2).
          const int pair = j / 2;
          const double u1 = 1.0 - to_unit<53>(w[4 * pair], w[4 * pair + 1]);  // (0, 1] for the log
          const double u2 = to_unit<53>(w[4 * pair + 2], w[4 * pair + 3]);
          const double radius = sqrt(-2.0 * log(u1));
          values[j] = radius * ((j & 1) != 0 ? sin(kTwoPi * u2) : cos(kTwoPi * u2)) * b + a;
          break;
        }
        case RandomKind::IntRange: {
          const auto low = static_cast<long long>(a);
          const auto range = static_cast<unsigned long long>(static_cast<long long>(b) - low);
          const unsigned long long wide = static_cast<unsigned long long>(w[2 * j]) << 32 | w[2 * j + 1];
          values[j] = 0.0;
          if (g * 4 + j < n) out[g * 4 + j] = convert<T>(static_cast<long long>(wide % range) + low);
          break;
        }
        case RandomKind::Bernoulli:
          values[j] = to_unit<53>(w[2 * j], w[2 * j + 1]) < a ? 1.0 : 0.0;
          break;
      }
    }
    if (kind == RandomKind::IntRange) continue;  // written exactly above (int64 > 2^53)
    for (int j = 0; j < 4; ++j) {
      if (g * 4 + j < n) out[g * 4 + j] = convert<T>(values[j]);
    }
  }
}

}  // namespace

bool launch_random(DType dtype, char* out, std::int64_t n, RandomKind kind, double a, double b, std::uint64_t seed,
                   std::uint64_t offset, StreamHandle stream) {
  if (n == 0) return true;
  return dispatch<AllTypes>(dtype, [&]<typename T>() {
    random_kernel<T><<<blocks_for((n + 3) / 4), kBlockSize, 0, as_stream(stream)>>>(reinterpret_cast<T*>(out), n, kind,
                                                                                   a, b, seed, offset);
    check_launch("random_cuda");
  });
}

}  // namespace kiln::cuda
