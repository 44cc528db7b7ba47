// core/onednn/runtime.cpp — engine, streams, descriptors, the primitive cache and Prepared
// (see runtime.h), and the backends:: queries about oneDNN (core/backends.h).
#include "core/onednn/runtime.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/backends.h"
#include "core/cpu/thread_budget.h"
#include "core/profiler_hooks.h"
#include "core/error.h"
#include "core/kernels.h"
#include "core/ops/allocate.h"

namespace kiln::onednn {

namespace {

/// oneDNN's reference implementations ("ref:any") accept any shape and layout, at a small
/// fraction of the optimised kernels' speed (0.1 GFLOP/s for a matmul with a stride-0 row,
/// where Eigen's GEMM packs the operand and runs at 60): Kiln treats them as no kernel.
struct OnlyReferenceKernel {};

void require_optimised(const dnnl::primitive_desc_base& pd) {
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw OnlyReferenceKernel{};
}

std::atomic<std::int64_t> g_primitives_created{0};
std::atomic<std::int64_t> g_fallbacks{0};
std::atomic<std::int64_t> g_reorders{0};

struct KeyHash {
  std::size_t operator()(const Key& key) const {
    std::size_t h = 0;
    for (std::int64_t v : key) h = h * 1000003u ^ std::hash<std::int64_t>{}(v);
    return h;
  }
};

/// The least recently used entries leave first (Note [The primitive cache]).
class PrimitiveCache {
 public:
  std::shared_ptr<const Prepared> get(const Key& key, const std::function<Prepared()>& build) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
    }
    // Built outside the lock: JIT compilation takes long, and another thread may build the
    // same entry meanwhile, which costs only the duplicate work.
    std::shared_ptr<const Prepared> entry;
    try {
      entry = std::make_shared<const Prepared>(build());
      ++g_primitives_created;
    } catch (const dnnl::error&) {
      // No kernel for this shape or layout (unimplemented), or a layout oneDNN cannot
      // describe (invalid_arguments): either way the Eigen route serves it.
    } catch (const OnlyReferenceKernel&) {
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.find(key) == index_.end()) {
      order_.emplace_front(key, entry);
      index_[key] = order_.begin();
      if (order_.size() > kCacheCapacity) {
        index_.erase(order_.back().first);
        order_.pop_back();
      }
    }
    return entry;
  }

 private:
  using Entry = std::pair<Key, std::shared_ptr<const Prepared>>;
  std::mutex mutex_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
};

PrimitiveCache& cache() {
  static PrimitiveCache instance;
  return instance;
}

/// A byte buffer from Kiln's CPU cache, for a scratchpad or an argument in its wanted layout
/// (on the meta device in a dry run).
Tensor scratch(std::size_t bytes, Device device) {
  return ops::empty_output({static_cast<std::int64_t>(bytes)}, DType::UInt8, device, "onednn");
}

}  // namespace

const dnnl::engine& engine() {
  static const dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

dnnl::stream& stream() {
  thread_local dnnl::stream instance(engine());
  return instance;
}

dnnl::memory::data_type data_type_of(DType dtype) {
  switch (dtype) {
    case DType::Float32: return dnnl::memory::data_type::f32;
    case DType::BFloat16: return dnnl::memory::data_type::bf16;
    case DType::Float16: return dnnl::memory::data_type::f16;
    case DType::Int32: return dnnl::memory::data_type::s32;
    case DType::Int8: return dnnl::memory::data_type::s8;
    case DType::UInt8: return dnnl::memory::data_type::u8;
    default: return dnnl::memory::data_type::undef;
  }
}

dnnl::memory::desc plain_desc(IntArrayRef sizes, IntArrayRef strides, DType dtype) {
  return dnnl::memory::desc(dnnl::memory::dims(sizes.begin(), sizes.end()), data_type_of(dtype),
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory::desc plain_desc(const Tensor& t) { return plain_desc(t.sizes(), t.strides(), t.dtype()); }

dnnl::primitive_attr attributes() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Prepared::Prepared(dnnl::primitive primitive, const dnnl::primitive_desc_base& pd, std::vector<Argument> arguments)
    : primitive_(std::move(primitive)),
      scratchpad_bytes_(pd.scratchpad_desc().get_size()),
      arguments_(std::move(arguments)) {
  require_optimised(pd);
  for (const Argument& a : arguments_) {
    if (a.plain == a.wanted) {
      reorders_.emplace_back();
      continue;
    }
    const dnnl::memory::desc& from = a.is_output ? a.wanted : a.plain;
    const dnnl::memory::desc& to = a.is_output ? a.plain : a.wanted;
    dnnl::reorder::primitive_desc rpd(engine(), from, engine(), to, attributes());
    reorders_.emplace_back(Reorder{dnnl::reorder(rpd), rpd.scratchpad_desc().get_size()});
  }
}

void Prepared::run(std::initializer_list<std::pair<int, void*>> pointers, std::initializer_list<int> in_wanted_layout) const {
  try {
    execute(pointers, in_wanted_layout);
  } catch (const dnnl::error& e) {
    KILN_FAIL("oneDNN error: ", e.what(), " (status ", static_cast<int>(e.status), ")");
  }
}

std::optional<ChannelBlockedLayout> channel_blocked_layout(const dnnl::memory::desc& desc, DType dtype) {
  const dnnl_memory_desc_t& md = desc.data;
  if (md.ndims != 4 || md.format_kind != dnnl_blocked || md.offset0 != 0 || md.data_type != static_cast<dnnl_data_type_t>(data_type_of(dtype))) {
    return std::nullopt;
  }
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  const std::int64_t elements = static_cast<std::int64_t>(desc.get_size() / itemsize(dtype));
  const std::int64_t channels = md.dims[1], height = md.dims[2], width = md.dims[3];
  if (blocking.inner_nblks == 0 && channels % 16 == 0 && blocking.strides[1] == 1 &&
      blocking.strides[3] == channels && blocking.strides[2] == width * channels &&
      blocking.strides[0] == height * width * channels) {
    return ChannelBlockedLayout{16, blocking.strides[0], 16, blocking.strides[2], blocking.strides[3], elements};
  }
  if (blocking.inner_nblks != 1 || blocking.inner_idxs[0] != 1 || blocking.strides[1] == 0) return std::nullopt;
  const std::int64_t block = blocking.inner_blks[0];
  if (block != 8 && block != 16) return std::nullopt;
  return ChannelBlockedLayout{block,
                              blocking.strides[0],
                              blocking.strides[1],
                              blocking.strides[2],
                              blocking.strides[3],
                              elements};
}

void relu_in_place(const Tensor& t) {
  if (!t.is_meta()) registered_kernels(DeviceType::CPU).unary[static_cast<std::size_t>(UnaryOp::Relu)](t, t);
}

void* address_of(const Tensor& t) { return t.is_meta() ? nullptr : t.raw_data_ptr(); }

const dnnl::memory::desc& Prepared::wanted(int id) const {
  for (const Argument& a : arguments_) {
    if (a.id == id) return a.wanted;
  }
  KILN_FAIL("oneDNN: the primitive has no argument ", id);
}

namespace {

bool contains(std::initializer_list<int> ids, int id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

}  // namespace

void Prepared::execute(std::initializer_list<std::pair<int, void*>> pointers,
                       std::initializer_list<int> in_wanted_layout) const {
  const bool dry = std::any_of(pointers.begin(), pointers.end(), [](const auto& p) { return p.second == nullptr; });
  if (dry) return plan_buffers(in_wanted_layout);
  profiler::note_route(profiler::Route::OneDnn);
  dnnl::stream& s = stream();
  std::vector<Tensor> buffers;  // keeps the wanted-layout copies and scratchpads alive to the end
  auto pointer_of = [&](int id) -> void* {
    for (const auto& [arg, p] : pointers) {
      if (arg == id) return p;
    }
    KILN_FAIL("oneDNN: no data given for argument ", id);
  };
  auto with_scratchpad = [&](std::size_t bytes, std::unordered_map<int, dnnl::memory> a) {
    if (bytes > 0) {
      buffers.push_back(scratch(bytes, kCPU));
      a[DNNL_ARG_SCRATCHPAD] = dnnl::memory({{static_cast<dnnl::memory::dim>(bytes)},
                                              dnnl::memory::data_type::u8, dnnl::memory::format_tag::x},
                                             engine(), buffers.back().raw_data_ptr());
    }
    return a;
  };
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::pair<std::size_t, dnnl::memory>> outputs_to_copy_back;
  for (std::size_t i = 0; i < arguments_.size(); ++i) {
    const Argument& a = arguments_[i];
    if (contains(in_wanted_layout, a.id)) {
      args[a.id] = dnnl::memory(a.wanted, engine(), pointer_of(a.id));
      continue;
    }
    dnnl::memory plain(a.plain, engine(), pointer_of(a.id));
    if (!reorders_[i]) {
      args[a.id] = plain;
      continue;
    }
    buffers.push_back(scratch(a.wanted.get_size(), kCPU));
    dnnl::memory wanted(a.wanted, engine(), buffers.back().raw_data_ptr());
    args[a.id] = wanted;
    if (a.is_output) {
      outputs_to_copy_back.emplace_back(i, plain);
    } else {
      reorders_[i]->primitive.execute(
          s, with_scratchpad(reorders_[i]->scratchpad_bytes, {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, wanted}}));
      g_reorders.fetch_add(1, std::memory_order_relaxed);
    }
  }
  primitive_.execute(s, with_scratchpad(scratchpad_bytes_, args));
  for (const auto& [i, plain] : outputs_to_copy_back) {
    reorders_[i]->primitive.execute(
        s, with_scratchpad(reorders_[i]->scratchpad_bytes, {{DNNL_ARG_FROM, args[arguments_[i].id]}, {DNNL_ARG_TO, plain}}));
    g_reorders.fetch_add(1, std::memory_order_relaxed);
  }
  s.wait();
}

// The same buffers as execute(), made and released in the same order, on the meta device.
void Prepared::plan_buffers(std::initializer_list<int> in_wanted_layout) const {
  std::vector<Tensor> buffers;
  auto scratchpad = [&](std::size_t bytes) {
    if (bytes > 0) buffers.push_back(scratch(bytes, kMeta));
  };
  auto reordered = [&](std::size_t i) { return reorders_[i] && !contains(in_wanted_layout, arguments_[i].id); };
  for (std::size_t i = 0; i < arguments_.size(); ++i) {
    if (!reordered(i)) continue;
    buffers.push_back(scratch(arguments_[i].wanted.get_size(), kMeta));
    if (!arguments_[i].is_output) scratchpad(reorders_[i]->scratchpad_bytes);
  }
  scratchpad(scratchpad_bytes_);
  for (std::size_t i = 0; i < arguments_.size(); ++i) {
    if (reordered(i) && arguments_[i].is_output) scratchpad(reorders_[i]->scratchpad_bytes);
  }
}

Key make_key(std::initializer_list<std::int64_t> values) {
  Key key{};
  extend_key(key, 0, IntArrayRef(values.begin(), values.size()));
  return key;
}

std::size_t extend_key(Key& key, std::size_t used, IntArrayRef values) {
  KILN_CHECK(used + values.size() < key.size(), "oneDNN: a primitive key of more than ", key.size() - 1, " values");
  for (std::int64_t v : values) key[used++] = v;
  return used;
}

std::shared_ptr<const Prepared> cached(const Key& key, const std::function<Prepared()>& build) {
  // A primitive splits its work for the thread count at its creation and forks that many
  // whenever it runs: the count the budget allows now is part of what it is cached under.
  Key with_threads = key;
  with_threads.back() = cpu::threads_for_region();
  return cache().get(with_threads, build);
}

void count_fallback() { ++g_fallbacks; }

bool fits_int32(const Tensor& t) {
  constexpr std::int64_t kLimit = std::numeric_limits<std::int32_t>::max();
  std::int64_t elements = 1, reach = 1;  // reach: 1 + the largest offset the strides address
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    const std::int64_t size = std::max<std::int64_t>(t.sizes()[d], 1);
    const std::int64_t stride = t.strides()[d] < 0 ? -t.strides()[d] : t.strides()[d];
    std::int64_t step = 0;
    if (__builtin_mul_overflow(elements, size, &elements) || elements > kLimit) return false;
    if (__builtin_mul_overflow(size - 1, stride, &step) || __builtin_add_overflow(reach, step, &reach) ||
        reach > kLimit) {
      return false;
    }
  }
  return true;
}

}  // namespace kiln::onednn

namespace kiln::backends {

bool onednn_is_available() { return true; }

std::string onednn_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
  }
}

bool onednn_has_bf16() {
  static const bool has = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return has;
}

OneDnnStats onednn_stats() {
  return {onednn::g_primitives_created.load(), onednn::g_fallbacks.load(), onednn::g_reorders.load()};
}

}  // namespace kiln::backends
