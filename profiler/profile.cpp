// profiler/profile.cpp — the recorder behind Profile: the hot path appends fixed-size records
// (a name pointer, two clock readings, indices into flat pools of shapes), and all the work of
// naming, nesting, self times and memory sums is done once, when recording stops.
#include "profiler/profile.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/allocator.h"
#include "core/error.h"
#include "core/profiler_hooks.h"
#include "core/tensor.h"
#include "core/warning.h"
#include "profiler/chrome_trace.h"
#include "profiler/html_report.h"
#include "profiler/op_name.h"

namespace kiln::profiler {

namespace detail {

using Clock = std::chrono::steady_clock;

class Recorder final : public Observer {
 public:
  Recorder(bool record_shapes, Clock::time_point start) : record_shapes_(record_shapes), start_(start) {
    events_.reserve(4096);
  }

  void op_begin(const char* node_name, std::span<const Tensor* const> inputs) override {
    RawEvent& e = begin(node_name, EventKind::Op);
    if (!record_shapes_) return;
    e.inputs_begin = static_cast<std::uint32_t>(inputs_.size());
    for (const Tensor* t : inputs) {
      RawInput in{.dims_begin = static_cast<std::uint32_t>(dims_.size())};
      if (t->defined()) {
        in.defined = true;
        in.dtype = t->dtype();
        for (std::int64_t d : t->sizes()) dims_.push_back(d);
      }
      in.ndim = static_cast<std::uint32_t>(dims_.size()) - in.dims_begin;
      inputs_.push_back(in);
    }
    e.inputs_end = static_cast<std::uint32_t>(inputs_.size());
  }
  void op_end(std::int64_t sequence_nr) override {
    if (stack_.empty()) return;
    events_[stack_.back()].sequence_nr = sequence_nr;
    end();
  }
  void node_begin(const char* name, std::uint64_t sequence_nr) override {
    RawEvent& e = begin(name, EventKind::BackwardNode);
    e.sequence_nr = sequence_nr == UINT64_MAX ? -1 : static_cast<std::int64_t>(sequence_nr);
  }
  void node_end() override { end(); }
  void region_begin(const char* name) override { begin(intern(name), EventKind::Region); }
  void region_end() override { end(); }
  void route(Route r) override {
    if (stack_.empty()) return;
    RawEvent& e = events_[stack_.back()];
    // A region's kernels (an optimizer's step, a replayed compiled step) belong to no op.
    if (e.kind != EventKind::Region) e.routes |= route_bit(r);
  }

  /// From the memory tap, on any thread, under the tap's lock.
  void memory(std::int64_t bytes, std::int64_t allocated_now) {
    const bool here = observer() == this;
    memory_.push_back({.ts_ns = now(), .bytes = bytes, .allocated_bytes = allocated_now, .on_profiled_thread = here});
    // Only the recording thread touches stack_, and this is that thread.
    if (here && !stack_.empty()) {
      RawEvent& e = events_[stack_.back()];
      (bytes > 0 ? e.allocated : e.freed) += bytes > 0 ? bytes : -bytes;
    }
  }

  /// Closes what is still open (a region left open by stop()) and builds the public events.
  std::vector<Event> finish() {
    while (!stack_.empty()) end();
    std::vector<Event> out(events_.size());
    std::unordered_map<const char*, std::string> op_names;
    std::unordered_map<std::int64_t, int> op_of_sequence_nr;
    for (std::size_t i = 0; i < events_.size(); ++i) {
      const RawEvent& r = events_[i];
      Event& e = out[i];
      e.kind = r.kind;
      if (r.kind == EventKind::Op) {
        auto it = op_names.find(r.name);
        if (it == op_names.end()) it = op_names.emplace(r.name, op_name_for_node(r.name)).first;
        e.name = it->second;
        if (r.sequence_nr >= 0) op_of_sequence_nr[r.sequence_nr] = static_cast<int>(i);
      } else {
        e.name = r.name;
      }
      e.start_ns = r.start_ns;
      e.end_ns = r.end_ns;
      e.self_ns = e.duration_ns();
      e.parent = r.parent;
      e.depth = r.parent < 0 ? 0 : out[r.parent].depth + 1;
      e.sequence_nr = r.sequence_nr;
      e.self_cpu_memory_usage = r.allocated - r.freed;
      for (std::uint32_t k = r.inputs_begin; k < r.inputs_end; ++k) {
        const RawInput& in = inputs_[k];
        e.input_shapes.emplace_back(dims_.begin() + in.dims_begin, dims_.begin() + in.dims_begin + in.ndim);
        e.input_dtypes.push_back(in.dtype);
      }
    }
    // Children begin after their parent, so one backward sweep folds each child into it.
    for (std::size_t i = out.size(); i-- > 0;) {
      Event& e = out[i];
      e.cpu_memory_usage += e.self_cpu_memory_usage;
      if (e.kind != EventKind::Region) e.route = route_name(events_[i].routes);
      if (e.parent >= 0) {
        out[e.parent].self_ns -= e.duration_ns();
        out[e.parent].cpu_memory_usage += e.cpu_memory_usage;
        events_[static_cast<std::size_t>(e.parent)].routes |= events_[i].routes;
      }
    }
    for (Event& e : out) {
      if (e.kind != EventKind::BackwardNode || e.sequence_nr < 0) continue;
      if (auto it = op_of_sequence_nr.find(e.sequence_nr); it != op_of_sequence_nr.end()) e.forward_op = it->second;
    }
    return out;
  }

  std::vector<MemorySample> take_memory() { return std::move(memory_); }

 private:
  struct RawEvent {
    const char* name;
    EventKind kind;
    int parent;
    std::int64_t start_ns;
    std::int64_t end_ns = 0;
    std::int64_t sequence_nr = -1;
    std::int64_t allocated = 0;  // this event's own allocator traffic, children excluded
    std::int64_t freed = 0;
    std::uint32_t inputs_begin = 0;
    std::uint32_t inputs_end = 0;
    std::uint8_t routes = 0;  // route_bit()s of the kernels it ran itself (children folded in at the end)
  };

  static std::uint8_t route_bit(Route r) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(r)); }
  /// The routes as one name; oneDNN and thin replace the CPU table's kernel, so they hide Eigen.
  static std::string route_name(std::uint8_t routes) {
    const bool specific = (routes & (route_bit(Route::Thin) | route_bit(Route::OneDnn))) != 0;
    std::string name;
    auto add = [&](Route r, const char* text) {
      if ((routes & route_bit(r)) == 0) return;
      if (!name.empty()) name += '+';
      name += text;
    };
    if (!specific) add(Route::Eigen, "Eigen");
    add(Route::Thin, "thin");
    add(Route::OneDnn, "oneDNN");
    add(Route::Cuda, "CUDA");
    return name;
  }
  struct RawInput {
    std::uint32_t dims_begin = 0;
    std::uint32_t ndim = 0;
    DType dtype = DType::Float32;
    bool defined = false;
  };

  std::int64_t now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
  }
  RawEvent& begin(const char* name, EventKind kind) {
    const int parent = stack_.empty() ? -1 : stack_.back();
    stack_.push_back(static_cast<int>(events_.size()));
    events_.push_back({.name = name, .kind = kind, .parent = parent, .start_ns = now()});
    return events_.back();
  }
  void end() {
    // An end without its begin: a RecordFunction that outlived stop(). Nothing to close.
    if (stack_.empty()) return;
    events_[stack_.back()].end_ns = now();
    stack_.pop_back();
  }
  /// Region names may be a caller's temporary string (RecordFunction): keep one copy of each.
  const char* intern(const char* name) {
    auto it = names_.find(name);
    if (it == names_.end()) it = names_.emplace(name).first;
    return it->c_str();
  }

  bool record_shapes_;
  Clock::time_point start_;
  std::vector<RawEvent> events_;
  std::vector<int> stack_;
  std::vector<RawInput> inputs_;
  std::vector<std::int64_t> dims_;
  std::vector<MemorySample> memory_;
  std::unordered_set<std::string> names_;
};

/// The allocator's one listener, never destroyed: a thread that read the pointer just before a
/// profile stopped still finds a live object, which then sees no recorder and drops the event.
class MemoryTap final : public MemoryObserver {
 public:
  void memory_event(const void*, std::int64_t bytes, std::int64_t allocated_now) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (target_ != nullptr) target_->memory(bytes, allocated_now);
  }
  void set_target(Recorder* r) {
    std::lock_guard<std::mutex> lock(mutex_);
    target_ = r;
  }
  static MemoryTap& instance() {
    static auto* tap = new MemoryTap();
    return *tap;
  }

 private:
  std::mutex mutex_;
  Recorder* target_ = nullptr;
};

}  // namespace detail

namespace {
std::atomic<bool> g_profiling{false};
}

Profile::Profile(ProfileOptions options) : options_(std::move(options)) {
  KILN_CHECK_NOT_IMPLEMENTED(!options_.with_stack, "profiler: with_stack=True is not supported yet");
  if (options_.schedule) options_.schedule->validate();
  KILN_CHECK(observer() == nullptr && !g_profiling.exchange(true),
             "Profiler is already enabled: one kiln::profiler::Profile records at a time");
  thread_ = std::this_thread::get_id();
  profiling_ = true;
  action_ = options_.schedule ? (*options_.schedule)(0) : ProfilerAction::Record;
  if (action_ != ProfilerAction::None) start_trace();
  begin_step_span();
}

Profile::~Profile() {
  // An on_trace_ready that throws here cannot propagate out of a destructor: say so instead.
  try {
    stop();
  } catch (const std::exception& e) {
    warn(std::string("profiler: stopping the profile at its destruction failed: ") + e.what());
  }
}

void Profile::step() {
  check_thread("step()");
  KILN_CHECK(profiling_, "profiler: step() after stop()");
  end_step_span();
  const ProfilerAction previous = action_;
  ++step_num_;
  action_ = options_.schedule ? (*options_.schedule)(step_num_) : ProfilerAction::Record;
  transit(previous, action_);
  begin_step_span();
}

void Profile::stop() {
  if (!profiling_) return;
  check_thread("stop()");
  end_step_span();
  profiling_ = false;
  const bool ready = recorder_ != nullptr && action_ != ProfilerAction::Warmup;
  if (ready) {
    stop_trace();
  } else if (recorder_ != nullptr) {
    discard_trace();
  }
  g_profiling.store(false);
  if (ready) trace_ready();
}

// PyTorch's _transit_action, folded: a saved recording ends and is handed over, a warm-up is
// thrown away when real recording (or nothing) follows, and any recording step starts a
// recorder if none runs.
void Profile::transit(ProfilerAction from, ProfilerAction to) {
  const bool recording_ends = from == ProfilerAction::RecordAndSave ||
                              (from == ProfilerAction::Record && (to == ProfilerAction::None || to == ProfilerAction::Warmup));
  if (recording_ends) {
    stop_trace();
    trace_ready();
  } else if (from == ProfilerAction::Warmup && to != ProfilerAction::Warmup) {
    discard_trace();
  }
  if (recorder_ == nullptr && to != ProfilerAction::None) start_trace();
}

void Profile::start_trace() {
  recorder_ = std::make_unique<detail::Recorder>(options_.record_shapes, detail::Clock::now());
  if (options_.profile_memory) {
    detail::MemoryTap::instance().set_target(recorder_.get());
    set_memory_observer(&detail::MemoryTap::instance());
  }
  initial_allocated_ = cpu_allocator_stats().allocated_bytes;
  set_observer(recorder_.get());
}

void Profile::uninstall_recorder() {
  set_observer(nullptr);
  if (options_.profile_memory) {
    set_memory_observer(nullptr);
    detail::MemoryTap::instance().set_target(nullptr);
  }
}

void Profile::discard_trace() {
  uninstall_recorder();
  recorder_.reset();
}

void Profile::stop_trace() {
  uninstall_recorder();
  events_ = recorder_->finish();
  memory_ = recorder_->take_memory();
  recorder_.reset();
}

void Profile::trace_ready() {
  if (options_.on_trace_ready) options_.on_trace_ready(*this);
}

void Profile::begin_step_span() {
  if (!options_.schedule || recorder_ == nullptr) return;
  recorder_->region_begin(("ProfilerStep#" + std::to_string(step_num_)).c_str());
  step_span_open_ = true;
}

void Profile::end_step_span() {
  if (step_span_open_ && recorder_ != nullptr) recorder_->region_end();
  step_span_open_ = false;
}

void Profile::check_thread(const char* what) const {
  KILN_CHECK(std::this_thread::get_id() == thread_, "profiler: ", what,
             " must run on the thread that started the Profile");
}

void Profile::check_finished() const { KILN_CHECK(recorder_ == nullptr, "Profiler didn't finish running"); }

const std::vector<Event>& Profile::events() const {
  check_finished();
  return events_;
}

const std::vector<MemorySample>& Profile::memory_samples() const {
  check_finished();
  return memory_;
}

EventList Profile::key_averages(bool group_by_input_shape) const {
  check_finished();
  return profiler::key_averages(events_, group_by_input_shape && options_.record_shapes, options_.profile_memory);
}

void Profile::export_chrome_trace(const std::string& path) const {
  check_finished();
  std::ofstream file(path);
  KILN_CHECK(file.good(), "profiler: cannot open '", path, "' for writing");
  file << chrome_trace_json(events_, memory_, initial_allocated_);
  KILN_CHECK(file.good(), "profiler: writing '", path, "' failed");
}

void Profile::export_html(const std::string& path) const {
  check_finished();
  std::ofstream file(path);
  KILN_CHECK(file.good(), "profiler: cannot open '", path, "' for writing");
  file << step_html(events_, memory_, initial_allocated_);
  KILN_CHECK(file.good(), "profiler: writing '", path, "' failed");
}

}  // namespace kiln::profiler
