// profiler/profile.h — kiln::profiler::Profile, torch.profiler.profile for C++: an RAII guard
// that records, on the thread that makes it, every differentiable op (name, input shapes and
// dtypes, self and total time, CPU memory), every backward node the engine runs (linked to the
// op that built it), the optimizer's and GradScaler's regions, and the CPU allocator's curve.
//
//   profiler::Profile prof({.record_shapes = true, .profile_memory = true});
//   train_step();
//   prof.stop();
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 10});
//   prof.export_chrome_trace("trace.json");  // open in https://ui.perfetto.dev
//
// The hooks it listens at are in core/profiler_hooks.h (Note [Profiler hook points]).
// Read next: profiler/key_averages.h, profiler/chrome_trace.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "profiler/event.h"
#include "profiler/key_averages.h"

namespace kiln::profiler {

/// torch.profiler.profile's switches.
struct ProfileOptions {
  bool record_shapes = false;   // keep each op's input shapes and dtypes
  bool profile_memory = false;  // keep the CPU allocator's events
  bool with_stack = false;      // source locations of ops: not recorded yet (an error if asked)
};

namespace detail {
class Recorder;
}

class Profile {
 public:
  /// Starts recording on this thread. One Profile records at a time in a process.
  explicit Profile(ProfileOptions options = {});
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// Stops recording (the destructor does too); the results below need it.
  void stop();
  bool is_recording() const { return recording_; }

  /// Every op, backward node and region recorded, in the order they began.
  const std::vector<Event>& events() const;
  /// Every CPU allocator event recorded (empty without profile_memory), in order.
  const std::vector<MemorySample>& memory_samples() const;
  /// allocated_bytes of the CPU allocator when recording started.
  std::int64_t initial_allocated_bytes() const { return initial_allocated_; }

  /// Events grouped by name (and input shapes), PyTorch's key_averages().
  EventList key_averages(bool group_by_input_shape = false) const;
  /// Writes the Trace Event JSON that chrome://tracing and Perfetto open.
  void export_chrome_trace(const std::string& path) const;

  const ProfileOptions& options() const { return options_; }

 private:
  void check_finished() const;

  ProfileOptions options_;
  std::unique_ptr<detail::Recorder> recorder_;
  bool recording_ = false;
  std::int64_t initial_allocated_ = 0;
  std::vector<Event> events_;
  std::vector<MemorySample> memory_;
};

}  // namespace kiln::profiler
