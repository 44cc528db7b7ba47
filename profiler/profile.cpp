// profiler/profile.cpp — the recorder behind Profile: the hot path appends fixed-size records
// (a name pointer, two clock readings, indices into flat pools of shapes and return addresses),
// and all the work of naming, nesting, self times, memory sums and symbolizing stacks is done
// once, when recording stops.
#include "profiler/profile.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/allocator.h"
#include "core/call_stack.h"
#include "core/error.h"
#include "core/profiler_hooks.h"
#include "core/tensor.h"
#include "core/warning.h"
#include "profiler/chrome_trace.h"
#include "profiler/collapsed_stacks.h"
#include "profiler/html_report.h"
#include "profiler/op_name.h"

namespace kiln::profiler {

namespace detail {

using Clock = std::chrono::steady_clock;

// Note [Stacks of ops]
// ~~~~~~~~~~~~~~~~~~~~
// with_stack keeps, per op, the return addresses glibc's backtrace() finds (a few hundred
// nanoseconds to a few microseconds, the only cost it adds while recording); naming them is
// slow (backtrace_symbols, __cxa_demangle) and is done once per distinct address when the
// recording stops. Of the named frames, those of namespace kiln are dropped wherever they
// are (the hook, Function::apply, Tensor's methods, nn::Module::forward, the engine), so what
// is left is the user's code, innermost first: the caller of `model.forward(x)` or of
// `loss.backward()` for the ops those run. PyTorch's with_stack does the same for Python:
// its stacks are the Python frames, never the C++ beneath them. Frames the dynamic symbol
// table cannot name (static and anonymous-namespace functions, a program linked without
// -rdynamic) are kept as backtrace_symbols() writes them ("train_cnn(+0x1c2f0)"), except
// among the op's innermost frames: up to the outermost Kiln frame of the run that starts the
// stack, an unnamed frame is Kiln's too (an anonymous-namespace op's Function<MmFn>::profiled,
// which an optimised build inlines and a sanitizer build does not).

// Note [GPU spans]
// ~~~~~~~~~~~~~~~~
// An op whose kernels run on a GPU returns as soon as they are queued; its host span says
// nothing of the device's time. So when an op (or backward node) first reports the CUDA route
// (kernels_for, just before its first launch), the recorder records a marker on the current
// stream, and another when the op returns, after its last launch: the stream's time between
// the two is the op's GPU span ("kernel", or "gpu_memcpy" for a copy), named after the op, with
// the op's index as PyTorch's "External id" on both, on a lane per stream. The markers are
// CUDA events with timing (profiler/stream_clock.h); nothing waits for them until recording
// stops, when each stream's spans are read relative to that stream's first marker, placed at
// the host time it was recorded (the earliest its work could start: the placement is a lower
// bound; the durations and the gaps between spans of a stream are the device's own).

class Recorder final : public Observer {
 public:
  Recorder(bool record_shapes, bool with_stack, StreamClock* stream_clock, Clock::time_point start)
      : record_shapes_(record_shapes),
        with_stack_(with_stack),
        stream_clock_(stream_clock),
        start_(start),
        tid_(current_thread_id()) {
    events_.reserve(4096);
  }

  void op_begin(const char* node_name, std::span<const Tensor* const> inputs) override {
    RawEvent& e = begin(node_name, EventKind::Op);
    if (with_stack_) capture_stack(e);
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
    if (!has_route(e.kind)) return;
    e.routes |= route_bit(r);
    if (r == Route::Cuda && stream_clock_ != nullptr && e.gpu < 0) {
      e.gpu = static_cast<int>(gpu_.size());
      gpu_.push_back({.event = stack_.back(), .host_ns = now(), .start = stream_clock_->record()});
    }
  }
  void span_begin(const char* name, SpanKind kind, SpanArgs args) override {
    begin(intern(name), event_kind(kind));
    if (!args.empty()) args_.emplace(static_cast<int>(events_.size()) - 1, std::move(args));
  }

  /// From the tap, on any thread, under the tap's lock: a span another thread (or a stream) ran.
  void remote_span(std::string name, SpanKind kind, Clock::time_point start, Clock::time_point end, std::int64_t tid,
                   SpanArgs args) {
    // A span that began before the recording did is not in it (as an op begun before is not).
    if (start < start_) return;
    remote_.push_back({.name = std::move(name), .kind = event_kind(kind), .start_ns = since_start(start),
                       .end_ns = since_start(end), .tid = tid, .args = std::move(args)});
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
    const auto [frame_names, frame_kinds] = name_frames();
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
      e.tid = tid_;
      if (auto it = args_.find(static_cast<int>(i)); it != args_.end()) e.args = std::move(it->second);
      // The innermost run of Kiln's and unnamed frames ends at its last Kiln frame.
      std::uint32_t first_user = r.frames_begin;
      for (std::uint32_t k = r.frames_begin; k < r.frames_end && frame_kinds[k] != FrameKind::User; ++k) {
        if (frame_kinds[k] == FrameKind::Kiln) first_user = k + 1;
      }
      for (std::uint32_t k = first_user; k < r.frames_end; ++k) {
        if (frame_kinds[k] != FrameKind::Kiln) e.stack.push_back(frame_names[k]);
      }
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
      if (has_route(e.kind)) e.route = route_name(events_[i].routes);
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
    // Other threads' and streams' spans follow, in the order they began: no parent, no children.
    std::stable_sort(remote_.begin(), remote_.end(), [](const Remote& a, const Remote& b) { return a.start_ns < b.start_ns; });
    for (Remote& r : remote_) {
      Event& e = out.emplace_back();
      e.name = std::move(r.name);
      e.kind = r.kind;
      e.start_ns = r.start_ns;
      e.end_ns = r.end_ns;
      e.self_ns = e.duration_ns();
      e.tid = r.tid;
      e.on_profiled_thread = false;
      e.args = std::move(r.args);
    }
    remote_.clear();
    append_gpu_spans(out);
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
    std::uint32_t frames_begin = 0;  // with_stack: its return addresses in frames_
    std::uint32_t frames_end = 0;
    int gpu = -1;  // its entry in gpu_, when its kernels ran on a GPU
  };
  /// The markers around one op's GPU work (Note [GPU spans]).
  struct GpuWork {
    int event;            // the op's index
    std::int64_t host_ns;  // when the start marker was recorded
    std::unique_ptr<StreamMarker> start;
    std::unique_ptr<StreamMarker> end = nullptr;
  };
  struct Remote {
    std::string name;
    EventKind kind;
    std::int64_t start_ns;
    std::int64_t end_ns;
    std::int64_t tid;
    SpanArgs args;
  };

  static EventKind event_kind(SpanKind kind) {
    switch (kind) {
      case SpanKind::Region: return EventKind::Region;
      case SpanKind::Collective: return EventKind::Collective;
      case SpanKind::Kernel: return EventKind::Kernel;
      case SpanKind::Memcpy: return EventKind::Memcpy;
    }
    return EventKind::Region;
  }
  /// Only ops and backward nodes say where their kernels ran; a region's or a collective's
  /// kernels (an optimizer's step, AVG's division) belong to no op.
  static bool has_route(EventKind kind) { return kind == EventKind::Op || kind == EventKind::BackwardNode; }

  /// See Note [GPU spans]: each stream's spans from its first marker, placed at that marker's
  /// host time; lanes numbered by first use.
  void append_gpu_spans(std::vector<Event>& out) {
    std::unordered_map<std::uint64_t, std::size_t> first_of_stream;  // stream -> its first gpu_ entry
    std::unordered_map<std::uint64_t, std::int64_t> lane_of_stream;
    for (std::size_t i = 0; i < gpu_.size(); ++i) {
      GpuWork& g = gpu_[i];
      if (g.end == nullptr) continue;  // an op still open at stop(): its end was never queued
      const std::uint64_t stream = g.start->stream();
      const std::size_t first = first_of_stream.emplace(stream, i).first->second;
      const std::int64_t lane = lane_of_stream.emplace(stream, static_cast<std::int64_t>(lane_of_stream.size())).first->second;
      const GpuWork& anchor = gpu_[first];
      const auto ns_since_anchor = [&](const StreamMarker& m) {
        return &m == anchor.start.get() ? std::int64_t{0}
                                        : static_cast<std::int64_t>(m.elapsed_ms_since(*anchor.start) * 1e6);
      };
      Event& op = out[static_cast<std::size_t>(g.event)];
      op.args.push_back({"External id", static_cast<std::int64_t>(g.event)});
      Event e;
      e.name = op.name;
      e.kind = op.name.find("copy") != std::string::npos ? EventKind::Memcpy : EventKind::Kernel;
      e.start_ns = anchor.host_ns + ns_since_anchor(*g.start);
      e.end_ns = anchor.host_ns + ns_since_anchor(*g.end);
      e.self_ns = e.duration_ns();
      e.tid = kStreamLaneBase + lane;
      e.on_profiled_thread = false;
      e.args.push_back({"External id", static_cast<std::int64_t>(g.event)});
      e.args.push_back({"stream", lane});
      out.push_back(std::move(e));
    }
    gpu_.clear();
  }

  /// See Note [Stacks of ops]. Frame 0 is capture_call_stack's own; the rest are named later.
  void capture_stack(RawEvent& e) {
    std::array<void*, 64> frames;
    const int n = capture_call_stack(frames);
    e.frames_begin = static_cast<std::uint32_t>(frames_.size());
    if (n > 1) frames_.insert(frames_.end(), frames.begin() + 1, frames.begin() + n);
    e.frames_end = static_cast<std::uint32_t>(frames_.size());
  }
  enum class FrameKind : std::uint8_t { Kiln, Unnamed, User };
  struct NamedFrames {
    std::vector<std::string> names;
    std::vector<FrameKind> kinds;
  };
  /// A name and a kind per entry of frames_; each distinct address is named once.
  NamedFrames name_frames() const {
    std::vector<void*> distinct(frames_.begin(), frames_.end());
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    const std::vector<std::string> names = symbolize_frames(distinct);
    NamedFrames out;
    out.names.reserve(frames_.size());
    out.kinds.reserve(frames_.size());
    for (void* f : frames_) {
      const std::string& name =
          names[static_cast<std::size_t>(std::lower_bound(distinct.begin(), distinct.end(), f) - distinct.begin())];
      out.names.push_back(name);
      out.kinds.push_back(is_kiln_frame(name)      ? FrameKind::Kiln
                          : is_unnamed_frame(name) ? FrameKind::Unnamed
                                                   : FrameKind::User);
    }
    return out;
  }

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

  std::int64_t since_start(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start_).count();
  }
  std::int64_t now() const { return since_start(Clock::now()); }
  RawEvent& begin(const char* name, EventKind kind) {
    const int parent = stack_.empty() ? -1 : stack_.back();
    stack_.push_back(static_cast<int>(events_.size()));
    events_.push_back({.name = name, .kind = kind, .parent = parent, .start_ns = now()});
    return events_.back();
  }
  void end() {
    // An end without its begin: a RecordFunction that outlived stop(). Nothing to close.
    if (stack_.empty()) return;
    RawEvent& e = events_[stack_.back()];
    if (e.gpu >= 0) gpu_[static_cast<std::size_t>(e.gpu)].end = stream_clock_->record();
    e.end_ns = now();
    stack_.pop_back();
  }
  /// Region names may be a caller's temporary string (RecordFunction): keep one copy of each.
  const char* intern(const char* name) {
    auto it = names_.find(name);
    if (it == names_.end()) it = names_.emplace(name).first;
    return it->c_str();
  }

  bool record_shapes_;
  bool with_stack_;
  StreamClock* stream_clock_;  // nullptr: no GPU spans
  Clock::time_point start_;
  std::int64_t tid_;  // the recording thread's lane
  std::vector<RawEvent> events_;
  std::vector<int> stack_;
  std::vector<RawInput> inputs_;
  std::vector<std::int64_t> dims_;
  std::vector<MemorySample> memory_;
  std::unordered_set<std::string> names_;
  std::vector<void*> frames_;                 // with_stack: every op's return addresses, one after another
  std::unordered_map<int, SpanArgs> args_;    // the args of this thread's spans, by event index
  std::vector<Remote> remote_;                // other threads' spans, guarded by the tap's lock
  std::vector<GpuWork> gpu_;                  // the GPU work of ops, in the order it was queued
};

/// The allocator's and the other threads' one listener, never destroyed: a thread that read the
/// pointer just before a profile stopped still finds a live object, which then sees no recorder
/// and drops the event.
class Tap final : public MemoryObserver, public SpanObserver {
 public:
  void memory_event(const void*, std::int64_t bytes, std::int64_t allocated_now) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (target_ != nullptr) target_->memory(bytes, allocated_now);
  }
  void span(std::string name, SpanKind kind, Clock::time_point start, Clock::time_point end, std::int64_t tid,
            SpanArgs args) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (target_ != nullptr) target_->remote_span(std::move(name), kind, start, end, tid, std::move(args));
  }
  void set_target(Recorder* r) {
    std::lock_guard<std::mutex> lock(mutex_);
    target_ = r;
  }
  static Tap& instance() {
    static auto* tap = new Tap();
    return *tap;
  }

 private:
  std::mutex mutex_;
  Recorder* target_ = nullptr;
};

}  // namespace detail

namespace {
std::atomic<bool> g_profiling{false};

/// Writes `text` to `path`, with the profiler's errors when the file cannot be opened or written.
void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream file(path);
  KILN_CHECK(file.good(), "profiler: cannot open '", path, "' for writing");
  file << text;
  KILN_CHECK(file.good(), "profiler: writing '", path, "' failed");
}

}  // namespace

Profile::Profile(ProfileOptions options) : options_(std::move(options)) {
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
  StreamClock* clock = options_.stream_clock != nullptr ? options_.stream_clock : cuda_stream_clock();
  recorder_ = std::make_unique<detail::Recorder>(options_.record_shapes, options_.with_stack, clock, detail::Clock::now());
  detail::Tap::instance().set_target(recorder_.get());
  set_span_observer(&detail::Tap::instance());
  if (options_.profile_memory) set_memory_observer(&detail::Tap::instance());
  initial_allocated_ = cpu_allocator_stats().allocated_bytes;
  set_observer(recorder_.get());
}

void Profile::uninstall_recorder() {
  set_observer(nullptr);
  set_span_observer(nullptr);
  if (options_.profile_memory) set_memory_observer(nullptr);
  detail::Tap::instance().set_target(nullptr);
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

EventList Profile::key_averages(bool group_by_input_shape, int group_by_stack_n) const {
  check_finished();
  KILN_CHECK_VALUE(group_by_stack_n <= 0 || options_.with_stack, "key_averages: group_by_stack_n=", group_by_stack_n,
                   " needs a profile recorded with with_stack=true");
  return profiler::key_averages(events_, group_by_input_shape && options_.record_shapes, options_.profile_memory,
                                group_by_stack_n);
}

void Profile::export_stacks(const std::string& path, const std::string& metric) const {
  check_finished();
  KILN_CHECK_VALUE(options_.with_stack, "export_stacks: the profile was recorded without with_stack=true");
  write_text_file(path, collapsed_stacks(events_, metric));
}

void Profile::export_chrome_trace(const std::string& path) const {
  check_finished();
  write_text_file(path, chrome_trace_json(events_, memory_, initial_allocated_));
}

void Profile::export_html(const std::string& path) const {
  check_finished();
  write_text_file(path, step_html(events_, memory_, initial_allocated_));
}

}  // namespace kiln::profiler
