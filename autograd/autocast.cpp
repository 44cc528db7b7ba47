// autograd/autocast.cpp — autocast's thread-local state, policy targets and the cast cache.
// See Note [Autocast policies] in autograd/autocast.h.
#include "autograd/autocast.h"

#include <array>
#include <sstream>
#include <unordered_map>

#include "core/backends.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "core/meta_allocations.h"
#include "core/warning.h"

namespace kiln::amp {

namespace {

struct CacheEntry {
  Tensor source;  // held so its address cannot be reused by another tensor while cached
  Tensor cast;
  std::uint32_t version;
};

struct ThreadState {
  std::array<bool, kNumDeviceTypes> enabled{};
  std::array<DType, kNumDeviceTypes> dtype{kBFloat16, kFloat16, kBFloat16};
  int guards = 0;          // guards alive, enabled or not: the cache lives until the last exits
  bool excluded = false;
  std::int64_t casts = 0;
  // Keyed by the parameter and by grad mode: a cast made under no_grad has no grad_fn and must
  // not be handed to a region that records.
  std::unordered_map<const TensorImpl*, CacheEntry> cache[2];
};

thread_local ThreadState state;

/// Meta tensors follow the region of the device type they stand for while a step is planned
/// (core/meta_allocations.h), so the plan casts what the real step would.
std::size_t slot(DeviceType type) {
  return static_cast<std::size_t>(type == DeviceType::Meta ? meta_stands_for() : type);
}

bool is_lower(DType t) { return t == kFloat16 || t == kBFloat16; }

/// Says once when CPU autocast can only save memory: the convolutions and matrix products it
/// casts down run in the low dtype natively only through oneDNN on a CPU with AVX512_BF16 or
/// AMX; elsewhere Kiln's kernels widen them to Float32 and round the result.
void warn_if_cpu_autocast_is_not_faster(DType dtype) {
  if (dtype == kBFloat16 && backends::onednn_has_bf16()) return;
  const std::string isa = backends::onednn_is_available() ? backends::onednn_cpu_isa() : "no oneDNN in this build";
  std::ostringstream message;
  message << "CPU autocast to " << scalar_type_name(dtype) << ": this CPU has no native " << scalar_type_name(dtype)
          << " kernels (oneDNN instruction set: " << isa
          << "; BFloat16 needs AVX512_BF16 or AMX), so convolutions and matrix products widen to Float32 and round "
             "back: autocast saves activation memory here, not time (and the widened copies can raise the "
             "step's peak; --plan / kiln::memory::plan shows it)";
  warn_once("cpu_autocast_not_faster", message.str());
}

}  // namespace

autocast::autocast(DeviceType device_type, bool enabled, std::optional<DType> dtype)
    : device_type_(device_type),
      previous_enabled_(state.enabled[slot(device_type)]),
      previous_dtype_(state.dtype[slot(device_type)]) {
  const char* name = device_type == DeviceType::CUDA ? "CUDA" : "CPU";
  KILN_CHECK_VALUE(device_type != DeviceType::Meta,
                   "User specified an unsupported autocast device_type 'meta'");
  if (dtype) {
    KILN_CHECK_VALUE(is_lower(*dtype), "In ", name, " autocast, but the target dtype is not supported: "
                     "autocast runs ops in Float16 or BFloat16, got ", *dtype);
  }
  ++state.guards;
  state.enabled[slot(device_type)] = enabled;
  if (dtype) state.dtype[slot(device_type)] = *dtype;
  if (enabled && device_type == DeviceType::CPU) warn_if_cpu_autocast_is_not_faster(state.dtype[slot(device_type)]);
}

autocast::~autocast() {
  state.enabled[slot(device_type_)] = previous_enabled_;
  state.dtype[slot(device_type_)] = previous_dtype_;
  if (--state.guards == 0) {
    state.cache[0].clear();
    state.cache[1].clear();
  }
}

bool is_autocast_enabled(DeviceType device_type) { return state.enabled[slot(device_type)]; }
DType get_autocast_dtype(DeviceType device_type) { return state.dtype[slot(device_type)]; }

std::size_t autocast_cache_size() { return state.cache[0].size() + state.cache[1].size(); }
std::int64_t autocast_cast_count() { return state.casts; }

namespace detail {

bool pending() noexcept {
  return (state.enabled[slot(DeviceType::CPU)] || state.enabled[slot(DeviceType::CUDA)]) && !state.excluded;
}

ExcludeGuard::ExcludeGuard() noexcept : excluded_(state.excluded, true) {}

namespace {

bool eligible(const Tensor& t) {
  return t.defined() && state.enabled[slot(t.device().type())] && is_floating_point(t.dtype()) &&
         t.dtype() != kFloat64;
}

}  // namespace

std::optional<DType> Inputs::target(CastPolicy policy) const {
  if (tensors_.empty() || !state.enabled[slot(tensors_[0]->device().type())]) return std::nullopt;
  switch (policy) {
    case CastPolicy::LowerPrecision:
      return state.dtype[slot(tensors_[0]->device().type())];
    case CastPolicy::Fp32:
      return kFloat32;
    case CastPolicy::Promote: {
      // Eligible dtypes are Float16, BFloat16 and Float32: any two different ones meet at
      // Float32 (neither half type holds the other).
      std::optional<DType> seen;
      for (const Tensor* t : tensors_) {
        if (!eligible(*t)) continue;
        if (!seen) seen = t->dtype();
        else if (*seen != t->dtype()) return kFloat32;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Tensor cast(const Tensor& t, DType dtype) {
  if (!eligible(t) || t.dtype() == dtype) return t;
  // PyTorch caches only Float32 leaves that require grad (parameters): they are cast once per
  // region however many ops read them. Activations are new every step; caching them would
  // only hold memory.
  const bool cacheable = t.dtype() == kFloat32 && is_lower(dtype) && t.is_leaf() && t.requires_grad();
  if (!cacheable) {
    ++state.casts;
    return t.to(dtype);
  }
  auto& cache = state.cache[is_grad_enabled() ? 1 : 0];
  auto it = cache.find(t.impl());
  if (it != cache.end() && it->second.version == t._version() && it->second.cast.dtype() == dtype) {
    return it->second.cast;
  }
  ++state.casts;
  Tensor cast_tensor = t.to(dtype);
  cache[t.impl()] = CacheEntry{t, cast_tensor, t._version()};
  return cast_tensor;
}

}  // namespace detail

}  // namespace kiln::amp
