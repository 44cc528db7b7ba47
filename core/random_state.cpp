// core/random_state.cpp — saving and restoring the random streams, for checkpoints that
// resume exactly (a resumed run's dropout masks and initialisations are the ones an
// uninterrupted run would have drawn). See Note [Random streams] in core/random.h.
#include <iomanip>
#include <sstream>

#include "core/capture_hooks.h"
#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/ops/copy.h"
#include "core/random.h"
#include "core/tensor.h"

namespace kiln {

namespace {

// The CPU state is text: a tag, the seed, the cached normal (hexadecimal, so exact) and the
// Mersenne Twister as the standard library writes it (624 words and its position).
constexpr std::string_view kCpuStateTag = "kiln.cpu_generator.v1";
constexpr std::string_view kCudaStateTag = "kiln.cuda_generator.v1";

Tensor bytes_to_tensor(const std::string& bytes) {
  return detail::tensor_from_values(bytes.data(), DType::UInt8, {static_cast<std::int64_t>(bytes.size())}, false,
                                    DType::UInt8, TensorOptions(), std::source_location::current(), "get_rng_state");
}

std::string tensor_to_bytes(const Tensor& state, const char* who) {
  KILN_CHECK_TYPE(state.defined() && state.dtype() == DType::UInt8 && state.dim() == 1, who,
                  ": expected a 1-D kiln.uint8 tensor saved by get_rng_state(), got ",
                  state.defined() ? detail::str_cat(state.dtype(), " of shape ", state.sizes()) : "an undefined tensor");
  const Tensor host = ops::contiguous(ops::to_device(state, kCPU, false));
  const auto* p = static_cast<const char*>(host.raw_data_ptr());
  return std::string(p, p + host.numel());
}

[[noreturn]] void not_a_state(const char* who, std::string_view tag) {
  detail::throw_error<ValueError>(std::source_location::current(), who, ": the tensor is not a generator state saved by get_rng_state() (expected one starting with '",
                  tag, "')");
}

}  // namespace

std::vector<std::uint8_t> CpuGenerator::get_state() const {
  std::ostringstream out;
  out << kCpuStateTag << ' ' << seed_ << ' ';
  if (next_double_normal_) out << std::hexfloat << *next_double_normal_ << std::defaultfloat;
  else out << '-';
  out << ' ' << engine_;
  const std::string text = out.str();
  return {text.begin(), text.end()};
}

void CpuGenerator::set_state(std::span<const std::uint8_t> bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string tag, normal;
  std::uint64_t seed = 0;
  std::mt19937 engine;
  in >> tag >> seed >> normal >> engine;
  if (!in || tag != kCpuStateTag) not_a_state("set_rng_state", kCpuStateTag);
  in >> std::ws;
  if (!in.eof()) not_a_state("set_rng_state", kCpuStateTag);
  std::optional<double> cached;
  if (normal != "-") {
    char* end = nullptr;
    cached = std::strtod(normal.c_str(), &end);
    if (end != normal.c_str() + normal.size()) not_a_state("set_rng_state", kCpuStateTag);
  }
  seed_ = seed;
  engine_ = engine;
  next_double_normal_ = cached;
}

Tensor get_rng_state() {
  capture::not_replayable("get_rng_state (a replay would return the state read once)");
  CpuGenerator& g = default_cpu_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  const std::vector<std::uint8_t> state = g.get_state();
  return bytes_to_tensor(std::string(state.begin(), state.end()));
}

void set_rng_state(const Tensor& state) {
  capture::not_replayable("set_rng_state (a replay would not set it)");
  const std::string bytes = tensor_to_bytes(state, "set_rng_state");
  CpuGenerator& g = default_cpu_generator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state({reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()});
}

namespace cuda {

Tensor get_rng_state() {
  const auto [seed, offset] = generator_state();
  std::ostringstream out;
  out << kCudaStateTag << ' ' << seed << ' ' << offset;
  return bytes_to_tensor(out.str());
}

void set_rng_state(const Tensor& state) {
  std::istringstream in(tensor_to_bytes(state, "cuda::set_rng_state"));
  std::string tag;
  std::uint64_t seed = 0, offset = 0;
  in >> tag >> seed >> offset;
  if (!in || tag != kCudaStateTag || !(in >> std::ws).eof()) not_a_state("cuda::set_rng_state", kCudaStateTag);
  set_generator_state(seed, offset);
}

}  // namespace cuda

}  // namespace kiln
