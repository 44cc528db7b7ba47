// core/random.h — the random number streams. The CPU generator is a Mersenne Twister
// (mt19937) seeded and consumed exactly as PyTorch's CPU generator is, so that after
// `manual_seed(s)` the CPU factories rand, randn (16 or more elements), randint and the
// uniform_/normal_ initialisers produce PyTorch's values (see Note [Random streams]).
// Read next: core/creation.h (rand, randn, randint), core/cpu/random.cpp.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <vector>

namespace kiln {

// Note [Random streams]
// ~~~~~~~~~~~~~~~~~~~~~
// One global CPU generator, guarded by a mutex; every CPU random op draws from it in element
// order, single-threaded, so results do not depend on the thread count.
//   uniform (float32): 24 random bits of one 32-bit draw, scaled to [from, to).
//   uniform (float64): 53 bits of a 64-bit draw (two 32-bit draws, first one high).
//   normal, >= 16 contiguous elements: fill with uniforms, then Box-Muller in blocks of 16
//     (u1 = 1 - x[j], u2 = x[j+8]); a ragged tail recomputes the last 16 from fresh draws.
//   normal, fewer elements: Box-Muller in double from two uniforms, caching the second value.
//   randint(low, high): one 32-bit draw modulo (high - low) (64-bit when the range needs it).
//   bernoulli(p) (dropout): a float64 uniform compared with p.
// These follow PyTorch 1.13's CPU kernels; tests compare against values printed by PyTorch.
// CUDA tensors draw from a counter-based generator per device (core/cuda), seeded by the same
// manual_seed.

class CpuGenerator {
 public:
  explicit CpuGenerator(std::uint64_t seed) { set_seed(seed); }

  void set_seed(std::uint64_t seed) {
    seed_ = seed;
    engine_.seed(static_cast<std::uint32_t>(seed));
    next_double_normal_.reset();
  }
  std::uint64_t seed() const { return seed_; }

  std::uint32_t random() { return static_cast<std::uint32_t>(engine_()); }
  std::uint64_t random64() {
    const std::uint64_t hi = random();
    const std::uint64_t lo = random();
    return (hi << 32) | lo;
  }
  /// A float32 uniform in [0, 1) from 24 random bits.
  float uniform_float() { return static_cast<float>(random() & ((1u << 24) - 1)) * (1.0f / (1u << 24)); }
  /// A float64 uniform in [0, 1) from 53 random bits.
  double uniform_double() {
    return static_cast<double>(random64() & ((std::uint64_t{1} << 53) - 1)) *
           (1.0 / static_cast<double>(std::uint64_t{1} << 53));
  }
  /// A standard normal in double (Box-Muller; the second value of each pair is cached).
  double normal_double();

  /// The whole state (engine, seed, cached normal) as bytes, so that a resumed run draws
  /// exactly what an uninterrupted one would; set_state() restores it and rejects bytes that
  /// are not such a state.
  std::vector<std::uint8_t> get_state() const;
  void set_state(std::span<const std::uint8_t> bytes);

  /// Callers hold this while drawing, so that one op's draws are contiguous in the stream.
  std::mutex& mutex() { return mutex_; }

 private:
  std::mt19937 engine_;
  std::uint64_t seed_ = 0;
  std::optional<double> next_double_normal_;
  std::mutex mutex_;
};

/// The process-wide CPU generator (default seed 67280421310721, PyTorch's).
CpuGenerator& default_cpu_generator();

/// Seeds every generator (CPU and, when built, CUDA).
void manual_seed(std::uint64_t seed);
/// The seed last given to manual_seed (or the default).
std::uint64_t initial_seed();

class Tensor;
/// The CPU generator's state as a 1-D UInt8 tensor (torch.get_rng_state()).
Tensor get_rng_state();
/// Restores a state from get_rng_state(); anything else is an error.
void set_rng_state(const Tensor& state);

namespace cuda {
/// The CUDA generator's state (seed and Philox offset) as a 1-D UInt8 tensor
/// (torch.cuda.get_rng_state()); "not compiled with CUDA" in a build without it.
Tensor get_rng_state();
void set_rng_state(const Tensor& state);
}  // namespace cuda

}  // namespace kiln
