// core/cpu/random.cpp — the CPU generator and the kernel that fills tensors from it.
// See Note [Random streams] in core/random.h for the exact streams.
#include <cmath>
#include <numbers>
#include <optional>

#include "core/capture_hooks.h"
#include "core/cpu/cpu_kernels.h"
#include "core/cuda/cuda.h"
#include "core/dispatch.h"
#include "core/random.h"

namespace kiln {

double CpuGenerator::normal_double() {
  if (next_double_normal_) {
    const double v = *next_double_normal_;
    next_double_normal_.reset();
    return v;
  }
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double r = std::sqrt(-2.0 * std::log1p(-u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  next_double_normal_ = r * std::sin(theta);
  return r * std::cos(theta);
}

CpuGenerator& default_cpu_generator() {
  static CpuGenerator generator(67280421310721ULL);
  return generator;
}

void manual_seed(std::uint64_t seed) {
  // Inside a captured step, a replay seeds again at the same point: the random kernels after it
  // draw what they drew eagerly. Only then: a profile shows no span for it.
  std::optional<capture::Region> region;
  if (capture::observer() != nullptr) region.emplace("manual_seed", [seed] { manual_seed(seed); });
  {
    CpuGenerator& g = default_cpu_generator();
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_seed(seed);
  }
  cuda::manual_seed(seed);
}

std::uint64_t initial_seed() { return default_cpu_generator().seed(); }

namespace cpu {

namespace {

/// A uniform in [from, to) with PyTorch's bit recipe for T (24 bits for float, 53 for
/// double, the type's own mantissa width for half types).
template <class T>
T uniform_value(CpuGenerator& g, double from, double to) {
  if constexpr (std::is_same_v<T, double>) {
    return g.uniform_double() * (to - from) + from;
  } else {
    constexpr int digits = std::is_same_v<T, float> ? 24 : std::is_same_v<T, Eigen::half> ? 11 : 8;
    // PyTorch computes in float with float bounds: (x * (to - from) + from).
    const float x = static_cast<float>(g.random() & ((1u << digits) - 1)) * (1.0f / (1u << digits));
    const float f = static_cast<float>(from), t = static_cast<float>(to);
    return static_cast<T>(x * (t - f) + f);
  }
}

/// Box-Muller over 16 values in place: x[j], x[j + 8] -> two normals.
template <class M>
void normal_fill_16(M* x, M mean, M std) {
  for (int j = 0; j < 8; ++j) {
    const M u1 = 1 - x[j];  // [0, 1) -> (0, 1] for the log
    const M u2 = x[j + 8];
    const M radius = std::sqrt(-2 * std::log(u1));
    const M theta = static_cast<M>(2.0 * std::numbers::pi) * u2;
    x[j] = radius * std::cos(theta) * std + mean;
    x[j + 8] = radius * std::sin(theta) * std + mean;
  }
}

template <class T>
void normal_fill(T* data, std::int64_t n, double mean, double std, CpuGenerator& g) {
  using M = OpMath<T>;
  std::vector<M> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = static_cast<M>(uniform_value<T>(g, 0.0, 1.0));
  for (std::int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16<M>(x.data() + i, M(mean), M(std));
  if (n % 16 != 0) {
    M* tail = x.data() + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = static_cast<M>(uniform_value<T>(g, 0.0, 1.0));
    normal_fill_16<M>(tail, M(mean), M(std));
  }
  for (std::int64_t i = 0; i < n; ++i) data[i] = static_cast<T>(x[static_cast<std::size_t>(i)]);
}

}  // namespace

// self is contiguous (the front-end fills a contiguous temporary otherwise).
void random_kernel(const Tensor& self, RandomKind kind, double a, double b) {
  CpuGenerator& g = default_cpu_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  const std::int64_t n = self.numel();
  switch (kind) {
    case RandomKind::Uniform:
      dispatch_dtype<FloatingTypes>(self.dtype(), "uniform_kernel_cpu", [&]<typename T>() {
        T* d = self.data_ptr<T>();
        for (std::int64_t i = 0; i < n; ++i) d[i] = uniform_value<T>(g, a, b);
      });
      return;
    case RandomKind::Normal:
      dispatch_dtype<FloatingTypes>(self.dtype(), "normal_kernel_cpu", [&]<typename T>() {
        T* d = self.data_ptr<T>();
        if (n >= 16) {
          normal_fill<T>(d, n, a, b, g);
        } else {
          for (std::int64_t i = 0; i < n; ++i) d[i] = convert<T>(g.normal_double() * b + a);
        }
      });
      return;
    case RandomKind::IntRange:
      dispatch_dtype<NumericTypes>(self.dtype(), "random_from_to_kernel_cpu", [&]<typename T>() {
        T* d = self.data_ptr<T>();
        const auto low = static_cast<std::int64_t>(a);
        const auto range = static_cast<std::uint64_t>(static_cast<std::int64_t>(b) - low);
        for (std::int64_t i = 0; i < n; ++i) {
          const std::uint64_t r = range >= (std::uint64_t{1} << 32) ? g.random64() % range
                                                                    : g.random() % range;
          d[i] = convert<T>(static_cast<std::int64_t>(r) + low);
        }
      });
      return;
    case RandomKind::Bernoulli:
      dispatch_dtype<AllTypes>(self.dtype(), "bernoulli_scalar_cpu_", [&]<typename T>() {
        T* d = self.data_ptr<T>();
        for (std::int64_t i = 0; i < n; ++i) d[i] = convert<T>(g.uniform_double() < a ? 1 : 0);
      });
      return;
  }
}

}  // namespace cpu
}  // namespace kiln
