// profiler/schedule.h — torch.profiler.schedule: which steps of a long run a Profile records.
// The first steps of a run are not representative (oneDNN builds its primitives, the caching
// allocator fills, a compiled step captures), and a trace of every step of an epoch is too big
// to open; so a schedule skips some steps, waits some more, warms up, records a few, and hands
// them to on_trace_ready, `repeat` times (0: until the run ends).
//
//   profiler::Profile prof({.schedule = profiler::Schedule{.wait = 1, .warmup = 1, .active = 3},
//                           .on_trace_ready = [](profiler::Profile& p) { p.export_chrome_trace("t.json"); }});
//   for (...) { train_step(); prof.step(); }
//
// Read next: profiler/profile.h (what each action does to the recording).
#pragma once

#include <cstdint>

namespace kiln::profiler {

/// What a Profile does during one step (torch.profiler.ProfilerAction).
enum class ProfilerAction : std::uint8_t {
  None,           // not recording
  Warmup,         // recording, to be thrown away: the profiler's own start-up settles here
  Record,         // recording
  RecordAndSave,  // recording, and the trace is ready when this step ends
};

/// torch.profiler.schedule(skip_first, wait, warmup, active, repeat), steps counted from 0.
struct Schedule {
  std::int64_t skip_first = 0;
  std::int64_t wait = 0;
  std::int64_t warmup = 0;
  std::int64_t active = 1;
  std::int64_t repeat = 0;  // cycles of wait + warmup + active; 0: cycle until the run ends

  /// The action for step `step` (PyTorch's schedule_fn).
  ProfilerAction operator()(std::int64_t step) const;
  /// Throws ValueError unless every count is >= 0 and active >= 1.
  void validate() const;
};

}  // namespace kiln::profiler
