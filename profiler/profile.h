// profiler/profile.h — kiln::profiler::Profile, torch.profiler.profile for C++: an RAII guard
// that records, on the thread that makes it, every differentiable op (name, input shapes and
// dtypes, self and total time, CPU memory, and with with_stack the user's frames that called
// it), every backward node the engine runs (linked to the op that built it), the optimizer's
// and GradScaler's regions, and the CPU allocator's curve; and, on any thread, the DataLoader
// workers' batches and the process groups' collectives, each on its thread's lane.
//
//   profiler::Profile prof({.record_shapes = true, .profile_memory = true, .with_stack = true});
//   train_step();
//   prof.stop();
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 10});
//   prof.export_chrome_trace("trace.json");  // open in https://ui.perfetto.dev
//   prof.export_html("step.html");           // or look at one step in a browser
//   std::cout << prof.key_averages(false, 3).table();          // + where the ops were called
//   prof.export_stacks("stacks.txt", "self_cpu_time_total");   // flamegraph.pl stacks.txt
//
// With a schedule (profiler/schedule.h) it records only some steps, marks each recorded one
// "ProfilerStep#N", and hands every finished recording to on_trace_ready, as PyTorch's does.
// The hooks it listens at are in core/profiler_hooks.h (Note [Profiler hook points]).
// Read next: profiler/schedule.h, profiler/key_averages.h, profiler/chrome_trace.h,
// profiler/html_report.h.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "profiler/event.h"
#include "profiler/key_averages.h"
#include "profiler/schedule.h"
#include "profiler/stream_clock.h"

namespace kiln::profiler {

class Profile;

/// torch.profiler.profile's switches.
struct ProfileOptions {
  bool record_shapes = false;   // keep each op's input shapes and dtypes
  bool profile_memory = false;  // keep the CPU allocator's events
  bool with_stack = false;      // keep the user's call stack of each op (Note [Stacks of ops])
  /// Times the GPU work of each op on its stream (Note [GPU spans]); nullptr: CUDA events when
  /// a device is available, no GPU spans otherwise. Tests pass a fake.
  StreamClock* stream_clock = nullptr;
  /// Which steps (counted by step()) are recorded; none: everything from construction to stop().
  std::optional<Schedule> schedule = std::nullopt;
  /// Called when a scheduled recording ends (after a RecordAndSave step, or at stop() while
  /// recording), with the Profile, whose results are then that recording's.
  std::function<void(Profile&)> on_trace_ready = nullptr;
};

namespace detail {
class Recorder;
}

class Profile {
 public:
  /// Starts profiling on this thread (recording at once unless the schedule says otherwise).
  /// One Profile exists at a time in a process.
  explicit Profile(ProfileOptions options = {});
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// Ends step step_num() and begins the next (PyTorch's prof.step()): the schedule's action
  /// for the new step starts, stops, discards or saves the recording.
  void step();
  std::int64_t step_num() const { return step_num_; }
  /// Stops profiling (the destructor does too); the results below need it.
  void stop();
  /// Whether ops are being recorded now.
  bool is_recording() const { return recorder_ != nullptr; }

  /// Every op, backward node and region of the recording thread, in the order they began;
  /// then the spans of other threads, in the order they began, and the GPU spans of ops, in
  /// the order they were queued (both with on_profiled_thread false).
  const std::vector<Event>& events() const;
  /// Every CPU allocator event recorded (empty without profile_memory), in order.
  const std::vector<MemorySample>& memory_samples() const;
  /// allocated_bytes of the CPU allocator when recording started.
  std::int64_t initial_allocated_bytes() const { return initial_allocated_; }

  /// Events grouped by name (and input shapes, and the first group_by_stack_n frames of their
  /// stacks, which needs with_stack), PyTorch's key_averages().
  EventList key_averages(bool group_by_input_shape = false, int group_by_stack_n = 0) const;
  /// Writes the collapsed stacks flamegraph.pl reads (profiler/collapsed_stacks.h); needs with_stack.
  void export_stacks(const std::string& path, const std::string& metric = "self_cpu_time_total") const;
  /// Writes the Trace Event JSON that chrome://tracing and Perfetto open.
  void export_chrome_trace(const std::string& path) const;
  /// Writes one self-contained HTML page drawing a step (profiler/html_report.h).
  void export_html(const std::string& path) const;

  const ProfileOptions& options() const { return options_; }

 private:
  void check_finished() const;
  void check_thread(const char* what) const;
  void start_trace();
  void uninstall_recorder();
  void stop_trace();
  void discard_trace();
  void trace_ready();
  void transit(ProfilerAction from, ProfilerAction to);
  /// Opens "ProfilerStep#<step_num>" when steps are recorded (with a schedule, as PyTorch).
  void begin_step_span();
  void end_step_span();

  ProfileOptions options_;
  std::thread::id thread_;
  std::unique_ptr<detail::Recorder> recorder_;
  bool profiling_ = false;  // between construction and stop()
  std::int64_t step_num_ = 0;
  ProfilerAction action_ = ProfilerAction::Record;
  bool step_span_open_ = false;
  std::int64_t initial_allocated_ = 0;
  std::vector<Event> events_;
  std::vector<MemorySample> memory_;
};

}  // namespace kiln::profiler
