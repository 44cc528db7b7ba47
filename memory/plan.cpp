// memory/plan.cpp — recording a step's meta allocations, replaying them through the CPU or CUDA
// allocator algorithm, and the report. See Note [Planning on the meta device] in memory/plan.h.
#include "memory/plan.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <list>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <unordered_map>

#include "autograd/autocast.h"
#include "autograd/engine.h"
#include "autograd/functions/nn.h"
#include "core/caching_allocator.h"
#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "core/messages.h"
#include "core/meta_allocations.h"
#include "nn/training_mode_guard.h"

namespace kiln::memory {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::Parameters: return "parameters";
    case Phase::Inputs: return "inputs";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::OptimizerStep: return "optimizer.step";
    case Phase::ZeroGrad: return "zero_grad";
  }
  return "?";
}

const char* category_name(Category category) {
  switch (category) {
    case Category::Parameters: return "parameters and buffers";
    case Category::Inputs: return "inputs";
    case Category::Activations: return "activations (kept for backward)";
    case Category::Gradients: return "gradients";
    case Category::OptimizerState: return "optimizer state";
    case Category::Temporaries: return "temporaries";
  }
  return "?";
}

namespace {

constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();

/// The most bytes a replay counts: what int64 holds. A device without a capacity is bounded
/// by it, so a step of tensors that add up past 8 EiB is out of memory, not a wrapped sum.
constexpr std::int64_t kMaxPlannedBytes = std::numeric_limits<std::int64_t>::max();

/// An allocator's rounded size as the report counts it: rounding a request just under 2^63
/// bytes up to its size class gives 2^63, one past int64.
std::int64_t clamp_bytes(std::size_t bytes) {
  return static_cast<std::int64_t>(std::min<std::size_t>(bytes, kMaxPlannedBytes));
}

/// What the observer heard: blocks, and allocation/release/phase events in program order.
class Recorder final : public MetaAllocationObserver, public PhaseMarker {
 public:
  struct Event {
    enum class Kind : std::uint8_t { Allocate, Release, EnterPhase } kind;
    std::size_t block = 0;  // Allocate, Release
    Phase phase = Phase::Forward;
    int step = 0;
  };

  std::uint64_t allocated(const MetaAllocation& a) override {
    PlannedBlock b;
    b.requested = static_cast<std::int64_t>(a.nbytes);
    b.described = a.described;
    if (a.described) {
      b.sizes.assign(a.sizes.begin(), a.sizes.end());
      b.dtype = a.dtype;
    }
    if (!label_.empty()) {
      b.op = label_;
    } else if (a.provenance != nullptr) {
      b.op = a.provenance->api;
      if (a.provenance->site.known()) b.site = a.provenance->site.str();
    }
    b.phase = phase_;
    b.step = step_;
    blocks.push_back(std::move(b));
    events.push_back({Event::Kind::Allocate, blocks.size() - 1});
    return blocks.size() - 1;
  }

  void released(std::uint64_t id) override { events.push_back({Event::Kind::Release, static_cast<std::size_t>(id)}); }

  void enter(Phase phase, int step) override {
    phase_ = phase;
    step_ = step;
    events.push_back({Event::Kind::EnterPhase, 0, phase, step});
  }

  /// Names the next allocations (a parameter's twin, the input batch) instead of their op.
  void label(std::string text) { label_ = std::move(text); }

  std::vector<PlannedBlock> blocks;
  std::vector<Event> events;

 private:
  Phase phase_ = Phase::Parameters;
  int step_ = 0;
  std::string label_;
};

/// Installs a recorder for as long as a plan runs.
class Listening {
 public:
  explicit Listening(Recorder& r) : previous_(set_meta_allocation_observer(&r)) {
    KILN_CHECK(previous_ == nullptr, "memory::plan: another plan is running (one at a time per process)");
  }
  ~Listening() { set_meta_allocation_observer(previous_); }
  Listening(const Listening&) = delete;
  Listening& operator=(const Listening&) = delete;

 private:
  MetaAllocationObserver* previous_;
};

// --- replaying on a device's allocator algorithm --------------------------------------------

/// The allocator of the planned device, fed the recorded events.
class DeviceModel {
 public:
  virtual ~DeviceModel() = default;
  /// Throws OutOfMemoryError when the device's capacity is exceeded.
  virtual void allocate(std::size_t block, std::size_t nbytes) = 0;
  virtual void release(std::size_t block) = 0;
  virtual std::int64_t rounded(std::size_t nbytes) const = 0;
  virtual std::int64_t allocated() const = 0;
  virtual std::int64_t reserved() const = 0;
  virtual std::int64_t largest_free() const = 0;
};

/// Note [CPU caching allocator]'s algorithm: size classes, freed blocks reused by class (the
/// most recently freed first), the least recently freed evicted beyond the cache limit.
class CpuModel final : public DeviceModel {
 public:
  CpuModel(std::int64_t capacity, std::size_t cache_limit) : capacity_(capacity), limit_(cache_limit) {}

  void allocate(std::size_t block, std::size_t nbytes) override {
    const std::size_t size = cpu_allocation_size(nbytes);
    auto& stack = by_class_[size];
    if (!stack.empty()) {
      lru_.erase(stack.back());
      stack.pop_back();
      cached_ -= static_cast<std::int64_t>(size);
    } else {
      // Compared by subtraction: allocated_ + cached_ <= limit always holds, so nothing here
      // can pass int64, however large the planned tensors (see kMaxPlannedBytes).
      const std::int64_t limit = capacity_ > 0 ? capacity_ : kMaxPlannedBytes;
      const bool too_large = size > static_cast<std::size_t>(limit);
      const auto need = static_cast<std::int64_t>(std::min<std::size_t>(size, kMaxPlannedBytes));
      if (too_large || need > limit - allocated_ - cached_) trim_to(0);  // fresh() empties the cache
      if (too_large || need > limit - allocated_) {
        detail::throw_error<OutOfMemoryError>(std::source_location::current(), msg::cpu_out_of_memory(size));
      }
    }
    allocated_ += static_cast<std::int64_t>(size);
    live_[block] = size;
  }

  void release(std::size_t block) override {
    const auto it = live_.find(block);
    if (it == live_.end()) return;
    const std::size_t size = it->second;
    live_.erase(it);
    allocated_ -= static_cast<std::int64_t>(size);
    lru_.push_front(size);
    by_class_[size].push_back(lru_.begin());
    cached_ += static_cast<std::int64_t>(size);
    trim_to(limit_);
  }

  std::int64_t rounded(std::size_t nbytes) const override { return clamp_bytes(cpu_allocation_size(nbytes)); }
  std::int64_t allocated() const override { return allocated_; }
  std::int64_t reserved() const override { return allocated_ + cached_; }
  std::int64_t largest_free() const override {
    for (auto it = by_class_.rbegin(); it != by_class_.rend(); ++it) {
      if (!it->second.empty()) return static_cast<std::int64_t>(it->first);
    }
    return 0;
  }

 private:
  void trim_to(std::size_t bytes) {
    while (!lru_.empty() && static_cast<std::size_t>(cached_) > bytes) {
      const std::size_t size = lru_.back();
      auto& stack = by_class_[size];
      // The oldest of a class is the bottom of its stack.
      stack.erase(stack.begin());
      lru_.pop_back();
      cached_ -= static_cast<std::int64_t>(size);
    }
  }

  std::int64_t capacity_;
  std::size_t limit_;
  std::int64_t allocated_ = 0, cached_ = 0;
  std::list<std::size_t> lru_;  // cached block sizes, most recently freed first
  std::map<std::size_t, std::vector<std::list<std::size_t>::iterator>> by_class_;  // oldest first
  std::unordered_map<std::size_t, std::size_t> live_;
};

/// A device of `capacity` bytes that hands out addresses but no memory: the CUDA caching
/// allocator's algorithm runs on it unchanged.
class PretendDevice final : public MemoryBackend {
 public:
  PretendDevice(std::size_t capacity, std::string name) : capacity_(capacity), name_(std::move(name)) {}
  void* allocate_segment(std::size_t nbytes) override {
    if (nbytes > capacity_ - used_) return nullptr;
    used_ += nbytes;
    const std::uintptr_t at = next_;
    next_ += (nbytes + kAlign - 1) / kAlign * kAlign;
    return reinterpret_cast<void*>(at);
  }
  void free_segment(void*, std::size_t nbytes) override { used_ -= nbytes; }
  std::size_t total_bytes() const override { return capacity_; }
  std::size_t free_bytes() const override { return capacity_ - used_; }
  std::string name() const override { return name_; }

 private:
  static constexpr std::uintptr_t kAlign = 2 << 20;
  std::size_t capacity_;
  std::string name_;
  std::size_t used_ = 0;
  std::uintptr_t next_ = kAlign;
};

class CudaModel final : public DeviceModel {
 public:
  CudaModel(std::size_t capacity, const std::string& name)
      : device_(capacity, name), cache_(device_, CachingAllocatorConfig::from_environment()) {}

  void allocate(std::size_t block, std::size_t nbytes) override { live_[block] = cache_.allocate(nbytes); }
  void release(std::size_t block) override {
    const auto it = live_.find(block);
    if (it == live_.end()) return;
    cache_.free(it->second);
    live_.erase(it);
  }
  std::int64_t rounded(std::size_t nbytes) const override { return clamp_bytes(CachingAllocator::round_size(nbytes)); }
  std::int64_t allocated() const override { return cache_.stats().allocated_bytes.current; }
  std::int64_t reserved() const override { return cache_.stats().reserved_bytes.current; }
  std::int64_t largest_free() const override { return cache_.stats().largest_free_block; }

 private:
  PretendDevice device_;
  CachingAllocator cache_;
  std::unordered_map<std::size_t, void*> live_;
};

std::unique_ptr<DeviceModel> model_of(Device device, std::int64_t& capacity) {
  if (device.is_cuda()) {
    if (capacity == 0 && cuda::is_available()) {
      capacity = static_cast<std::int64_t>(cuda::mem_get_info(device.index()).second);
    }
    const std::size_t bytes = capacity > 0 ? static_cast<std::size_t>(capacity) : std::numeric_limits<std::size_t>::max() / 4;
    return std::make_unique<CudaModel>(bytes, "GPU " + std::to_string(std::max<int>(device.index(), 0)) + " (planned)");
  }
  KILN_CHECK_VALUE(device.is_cpu(), "memory::plan: plans are made for cpu or cuda devices, got ", device);
  return std::make_unique<CpuModel>(capacity, cpu_cache_limit());
}

/// Each block's category: by its phase, and whether it outlived the phase that made it.
void categorise(std::vector<PlannedBlock>& blocks, const std::vector<Recorder::Event>& events) {
  using Kind = Recorder::Event::Kind;
  std::vector<std::size_t> made_at(blocks.size(), kNever), freed_at(blocks.size(), kNever);
  std::vector<std::size_t> phase_end(events.size(), events.size());  // for each event: the next phase change
  for (std::size_t i = events.size(), next = events.size(); i-- > 0;) {
    phase_end[i] = next;
    if (events[i].kind == Kind::EnterPhase) next = i;
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].kind == Kind::Allocate) made_at[events[i].block] = i;
    if (events[i].kind == Kind::Release) freed_at[events[i].block] = i;
  }
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    PlannedBlock& block = blocks[b];
    const bool outlived_phase = made_at[b] != kNever && freed_at[b] > phase_end[made_at[b]];
    switch (block.phase) {
      case Phase::Parameters: block.category = Category::Parameters; break;
      case Phase::Inputs: block.category = Category::Inputs; break;
      case Phase::Forward: block.category = outlived_phase ? Category::Activations : Category::Temporaries; break;
      case Phase::Backward: block.category = outlived_phase ? Category::Gradients : Category::Temporaries; break;
      case Phase::OptimizerStep:
        block.category = outlived_phase ? Category::OptimizerState : Category::Temporaries;
        break;
      case Phase::ZeroGrad: block.category = Category::Temporaries; break;
    }
  }
}

MemoryPlan replay(Recorder& recorder, const PlanOptions& options) {
  using Kind = Recorder::Event::Kind;
  MemoryPlan result;
  result.device = options.device;
  result.capacity = options.capacity;
  std::unique_ptr<DeviceModel> device = model_of(options.device, result.capacity);
  categorise(recorder.blocks, recorder.events);
  for (PlannedBlock& b : recorder.blocks) b.bytes = device->rounded(static_cast<std::size_t>(b.requested));

  std::size_t peak_event = kNever;
  for (std::size_t i = 0; i < recorder.events.size(); ++i) {
    const auto& e = recorder.events[i];
    if (e.kind == Kind::Release) {
      device->release(e.block);
      continue;
    }
    if (e.kind != Kind::Allocate) continue;
    ++result.allocations;
    const PlannedBlock& block = recorder.blocks[e.block];
    try {
      device->allocate(e.block, static_cast<std::size_t>(block.requested));
    } catch (const OutOfMemoryError& oom) {
      result.out_of_memory = true;
      result.oom_message = oom.message();
      result.oom_op = block.op;
      result.oom_phase = block.phase;
      break;
    }
    result.peak_reserved = std::max(result.peak_reserved, device->reserved());
    if (device->allocated() > result.peak_allocated) {
      result.peak_allocated = device->allocated();
      peak_event = i;
      result.reserved_at_peak = device->reserved();
      result.largest_free_at_peak = device->largest_free();
    }
  }
  if (peak_event == kNever) return result;

  const PlannedBlock& reached = recorder.blocks[recorder.events[peak_event].block];
  result.peak_op = reached.op;
  result.peak_phase = reached.phase;
  result.peak_step = reached.step;
  result.cached_free_at_peak = result.reserved_at_peak - result.peak_allocated;
  result.fragmentation_at_peak =
      result.cached_free_at_peak > 0
          ? 1.0 - static_cast<double>(result.largest_free_at_peak) / static_cast<double>(result.cached_free_at_peak)
          : 0.0;

  // What is live at the peak.
  std::vector<bool> live(recorder.blocks.size(), false);
  for (std::size_t i = 0; i <= peak_event; ++i) {
    const auto& e = recorder.events[i];
    if (e.kind == Kind::Allocate) live[e.block] = true;
    if (e.kind == Kind::Release) live[e.block] = false;
  }
  std::map<std::string, OpBytes> by_op;
  for (std::size_t b = 0; b < live.size(); ++b) {
    if (!live[b]) continue;
    const PlannedBlock& block = recorder.blocks[b];
    result.peak_bytes[static_cast<std::size_t>(block.category)] += block.bytes;
    if (block.category != Category::Activations) continue;
    result.top_activations.push_back(block);
    OpBytes& o = by_op[block.op];
    o.op = block.op;
    o.bytes += block.bytes;
    ++o.count;
  }
  const auto larger = [](const auto& a, const auto& b) { return a.bytes > b.bytes; };
  std::stable_sort(result.top_activations.begin(), result.top_activations.end(), larger);
  if (result.top_activations.size() > options.top) result.top_activations.resize(options.top);
  for (auto& [op, o] : by_op) result.activations_by_op.push_back(o);
  std::stable_sort(result.activations_by_op.begin(), result.activations_by_op.end(), larger);
  return result;
}

/// Runs the model on the meta twins while alive; puts its own tensors back after.
class SwappedTensors {
 public:
  SwappedTensors(nn::Module& model, StateDict& twins) : model_(model), twins_(twins) { model_.swap_tensors(twins_); }
  ~SwappedTensors() { model_.swap_tensors(twins_); }
  SwappedTensors(const SwappedTensors&) = delete;
  SwappedTensors& operator=(const SwappedTensors&) = delete;

 private:
  nn::Module& model_;
  StateDict& twins_;
};

/// Every size of a planned input or target is at least 1 (a 0-d spec has none to check).
void check_spec(const char* what, const TensorSpec& spec) {
  for (std::size_t d = 0; d < spec.sizes.size(); ++d) {
    KILN_CHECK_VALUE(spec.sizes[d] >= 1, "memory::plan: ", what, " sizes must be positive, got ", IntArrayRef(spec.sizes),
                     d == 0 ? " (dim 0 is the batch)" : "");
  }
}

TensorSpec with_batch(const TensorSpec& spec, std::int64_t batch) {
  TensorSpec s = spec;
  KILN_CHECK_VALUE(!s.sizes.empty(), "max_batch: the input and target shapes need a batch dimension");
  s.sizes[0] = batch;
  return s;
}

}  // namespace

MemoryPlan plan(const std::function<void(PhaseMarker& marker)>& run, const PlanOptions& options) {
  KILN_CHECK_VALUE(options.device.is_cpu() || options.device.is_cuda(),
                   "memory::plan: plans are made for cpu or cuda devices, got ", options.device);
  KILN_CHECK_VALUE(options.capacity >= 0, "memory::plan: capacity must be a number of bytes, or 0 for the device's ",
                   "own, got ", options.capacity);
  KILN_CHECK_VALUE(static_cast<bool>(run), "memory::plan: the step function is empty");
  Recorder recorder;
  {
    Listening listening(recorder);
    MetaStandsForGuard stands_for(options.device.type());
    run(recorder);
  }
  MemoryPlan result = replay(recorder, options);
  result.planned = "a step function";
  return result;
}

MemoryPlan plan(nn::Module& model, const TensorSpec& input, const TensorSpec& target,
                const OptimizerFactory& make_optimizer, const PlanOptions& options) {
  // Checked before anything runs: an empty batch would plan a step that allocates nothing and
  // report that it fits, and an empty std::function throws only "bad_function_call".
  check_spec("input", input);
  check_spec("target", target);
  KILN_CHECK_VALUE(!options.train || make_optimizer,
                   "memory::plan: make_optimizer is empty; a training step needs a factory that builds its optimizer");
  const LossFunction loss_of = options.loss ? options.loss : LossFunction([](const Tensor& out, const Tensor& y) {
    return cross_entropy(out, y);
  });
  MemoryPlan result = plan(
      [&](PhaseMarker& marker) {
        auto& recorder = static_cast<Recorder&>(marker);
        recorder.enter(Phase::Parameters, 0);
        StateDict twins;
        for (const auto& [name, p] : model.named_parameters()) {
          recorder.label("parameter " + name);
          twins.insert(name, empty(p.sizes(), TensorOptions().dtype(p.dtype()).device(kMeta).requires_grad(p.requires_grad())));
        }
        for (const auto& [name, b] : model.named_buffers()) {
          recorder.label("buffer " + name);
          twins.insert(name, empty(b.sizes(), TensorOptions().dtype(b.dtype()).device(kMeta)));
        }
        SwappedTensors swapped(model, twins);
        nn::TrainingModeGuard mode(model, options.train);
        std::unique_ptr<optim::Optimizer> optimizer;
        if (options.train) {
          optimizer = make_optimizer(model.parameters());
          KILN_CHECK_VALUE(optimizer != nullptr,
                           "memory::plan: make_optimizer returned nullptr; it must return the optimizer it built");
        }

        recorder.enter(Phase::Inputs, 0);
        recorder.label("input");
        const Tensor x = empty(input.sizes, TensorOptions().dtype(input.dtype).device(kMeta));
        recorder.label("target");
        const Tensor y = empty(target.sizes, TensorOptions().dtype(target.dtype).device(kMeta));
        recorder.label("");
        for (int step = 1; step <= 2; ++step) {
          recorder.enter(Phase::Forward, step);
          Tensor loss;
          {
            std::optional<NoGradGuard> no_grad;
            if (!options.train) no_grad.emplace();
            amp::autocast region(options.device.type(), options.mixed_precision);
            loss = loss_of(model.forward(x), y);
          }
          if (!options.train) continue;
          recorder.enter(Phase::Backward, step);
          loss.backward();
          recorder.enter(Phase::OptimizerStep, step);
          optimizer->step();
          recorder.enter(Phase::ZeroGrad, step);
          optimizer->zero_grad();
        }
      },
      options);
  result.planned = options.train ? "2 training steps (forward, loss, backward, step, zero_grad)"
                                 : "2 forward passes and losses, eval() under no_grad";
  if (options.mixed_precision) result.planned += ", autocast";
  return result;
}

std::int64_t default_budget(Device device) {
  std::int64_t available = 0;
  if (device.is_cuda()) {
    available = static_cast<std::int64_t>(cuda::mem_get_info(device.index()).first);
  } else {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::int64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit) {
      if (key == "MemAvailable:") {
        available = kib * 1024;
        break;
      }
    }
    KILN_CHECK(available > 0, "max_batch: could not read MemAvailable from /proc/meminfo; give a budget");
  }
  return available / 10 * 9;
}

BatchSearch max_batch(nn::Module& model, const TensorSpec& input, const TensorSpec& target,
                      const OptimizerFactory& make_optimizer, const PlanOptions& options, std::int64_t budget,
                      std::int64_t limit) {
  KILN_CHECK_VALUE(limit >= 1, "max_batch: limit must be at least 1, got ", limit);
  KILN_CHECK_VALUE(budget >= 0, "max_batch: budget must be a number of bytes, or 0 for default_budget(), got ", budget);
  BatchSearch search;
  search.budget = budget > 0 ? budget : default_budget(options.device);
  PlanOptions bounded = options;
  bounded.capacity = search.budget;
  // Only a batch that fits raises `good`, so the last plan that fit is always the plan at `good`.
  std::optional<MemoryPlan> at_fit;
  auto fits = [&](std::int64_t batch) {
    ++search.plans;
    MemoryPlan p = plan(model, with_batch(input, batch), with_batch(target, batch), make_optimizer, bounded);
    const bool ok = p.fits() && p.peak_reserved <= search.budget;
    if (ok) at_fit = std::move(p);
    else if (!at_fit) search.plan = std::move(p);
    return ok;
  };
  // Doubling finds a batch that does not fit (or the limit), then bisection the boundary.
  std::int64_t good = 0, bad = 0;
  for (std::int64_t b = 1;; b = b > limit / 2 ? limit : b * 2) {  // b * 2 may pass int64 near the limit
    if (!fits(b)) {
      bad = b;
      break;
    }
    good = b;
    if (b == limit) break;
  }
  if (bad != 0) {
    while (bad - good > 1) {
      const std::int64_t mid = good + (bad - good) / 2;
      (fits(mid) ? good : bad) = mid;
    }
  }
  search.batch = good;
  if (at_fit) search.plan = std::move(*at_fit);
  return search;
}

std::string MemoryPlan::summary() const {
  std::ostringstream os;
  auto size = [](std::int64_t bytes) { return format_memory_size(bytes); };
  const std::string rule(76, '=');
  const std::string thin(76, '-');
  char line[256];
  os << rule << "\n";
  std::snprintf(line, sizeof line, "|  Kiln memory plan for %s%-*s|\n", device.str().c_str(),
                static_cast<int>(51 - device.str().size()), capacity > 0 ? (" (" + size(capacity) + ")").c_str() : "");
  os << line;
  std::snprintf(line, sizeof line, "|  %-72s|\n", planned.c_str());
  os << line;
  os << rule << "\n";
  auto row = [&](const std::string& label, const std::string& value) {
    std::snprintf(line, sizeof line, "| %-45s| %25s |\n", label.c_str(), value.c_str());
    os << line;
  };
  row("Peak allocated memory", size(peak_allocated));
  row("Peak reserved memory", size(peak_reserved));
  row("Allocations planned", std::to_string(allocations));
  if (out_of_memory) {
    os << thin << "\n";
    row("OUT OF MEMORY during", std::string(phase_name(oom_phase)) + ": " + oom_op);
    os << "| " << oom_message.substr(0, oom_message.find('\n')) << "\n";
  }
  os << thin << "\n";
  row("At the peak (" + std::string(phase_name(peak_phase)) + ", step " + std::to_string(peak_step) + ")",
      "during " + peak_op);
  for (std::size_t c = 0; c < kNumCategories; ++c) {
    row("  " + std::string(category_name(static_cast<Category>(c))), size(peak_bytes[c]));
  }
  row("  cached, free (reserved - allocated)", size(cached_free_at_peak));
  row("  largest free cached block", size(largest_free_at_peak));
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%.1f %%", 100.0 * fragmentation_at_peak);
  row("  fragmentation (1 - largest / cached free)", fraction);
  if (!activations_by_op.empty()) {
    os << thin << "\n";
    row("Activations at the peak, by op", "");
    for (const OpBytes& o : activations_by_op) {
      row("  " + o.op + " (" + std::to_string(o.count) + ")", size(o.bytes));
    }
    os << thin << "\n";
    row("Largest activations", "");
    for (const PlannedBlock& b : top_activations) {
      std::ostringstream what;
      what << "  " << b.op;
      if (b.described) what << " " << IntArrayRef(b.sizes) << " " << scalar_type_name(b.dtype);
      if (!b.site.empty()) what << " at " << b.site;
      row(what.str(), size(b.bytes));
    }
  }
  os << rule << "\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const MemoryPlan& plan) { return os << plan.summary(); }

}  // namespace kiln::memory
