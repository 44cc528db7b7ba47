// examples/support/step_profiler.h — every program's --profile DIR (and --profile-with-stack):
// a profiler::Profile on PyTorch's usual schedule (one step waited, one warm-up step, three
// recorded), its trace and page of one step written to DIR when the three are done, its table
// printed. A training loop
// calls step() after each step and finish() at its end; without a folder both do nothing.
// Read next: profiler/schedule.h, examples/support/training.h.
#pragma once

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "kiln.h"

namespace kiln::examples {

/// The steps --profile records: the first ones build oneDNN primitives, fill the allocator's
/// cache and capture a compiled step, which later steps never do again.
inline constexpr profiler::Schedule kProfileSchedule{.wait = 1, .warmup = 1, .active = 3, .repeat = 1};

class StepProfiler {
 public:
  /// Profiles into `dir` ("" = not at all), writing trace<suffix>.json and step<suffix>.html
  /// there, and with `with_stack` each op's call stack too (--profile-with-stack: the table gains
  /// PyTorch's "Source Location" column and stacks<suffix>.txt holds them for flamegraph.pl). The
  /// table is printed when `print_table` (under DDP only rank 0 prints).
  explicit StepProfiler(const std::string& dir, bool with_stack = false, const std::string& suffix = "",
                        bool print_table = true) {
    if (dir.empty()) return;
    prof_.emplace(profiler::ProfileOptions{
        .record_shapes = true,
        .profile_memory = true,
        .with_stack = with_stack,
        .schedule = kProfileSchedule,
        .on_trace_ready = [dir, with_stack, suffix, print_table](profiler::Profile& p) {
          report(p, dir, with_stack, suffix, print_table);
        }});
  }
  /// After each training step, outside the step's own code.
  void step() {
    if (prof_) prof_->step();
  }
  /// At the end of the run: a run shorter than the schedule reports the steps it recorded.
  void finish() {
    if (prof_) prof_->stop();
  }

 private:
  static void report(const profiler::Profile& prof, const std::string& dir, bool with_stack, const std::string& suffix,
                     bool print_table) {
    std::filesystem::create_directories(dir);
    const auto path = [&](const char* stem, const char* extension) {
      return (std::filesystem::path(dir) / (stem + suffix + extension)).string();
    };
    const std::string trace = path("trace", ".json"), html = path("step", ".html"), stacks = path("stacks", ".txt");
    prof.export_chrome_trace(trace);
    prof.export_html(html);
    if (with_stack) prof.export_stacks(stacks, "self_cpu_time_total");
    if (!print_table) return;
    // With stacks, PyTorch's idiom: the table grouped by where each op was called from.
    const profiler::EventList averages = with_stack ? prof.key_averages(false, kStackFramesShown) : prof.key_averages();
    std::printf("\nprofile (after %lld warm-up steps):\n%s",
                static_cast<long long>(kProfileSchedule.wait + kProfileSchedule.warmup),
                averages.table({.sort_by = "self_cpu_time_total", .row_limit = 20}).c_str());
    std::printf("trace written to %s (open in https://ui.perfetto.dev or chrome://tracing), one step drawn in %s\n",
                trace.c_str(), html.c_str());
    if (with_stack) std::printf("call stacks written to %s (flamegraph.pl or speedscope draw them)\n", stacks.c_str());
  }

  /// Frames of each op's stack the table groups by (PyTorch's group_by_stack_n).
  static constexpr int kStackFramesShown = 3;

  std::optional<profiler::Profile> prof_;
};

}  // namespace kiln::examples
