// examples/support/step_profiler.h — every program's --profile DIR: a profiler::Profile on
// PyTorch's usual schedule (one step waited, one warm-up step, three recorded), its trace and
// page of one step written to DIR when the three are done, its table printed. A training loop
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
  /// Profiles into `dir` ("" = not at all), writing `trace_file` and `html_file` there; the
  /// table is printed when `print_table` (under DDP only rank 0 prints).
  explicit StepProfiler(const std::string& dir, std::string trace_file = "trace.json",
                        std::string html_file = "step.html", bool print_table = true) {
    if (dir.empty()) return;
    prof_.emplace(profiler::ProfileOptions{
        .record_shapes = true,
        .profile_memory = true,
        .schedule = kProfileSchedule,
        .on_trace_ready = [dir, trace_file = std::move(trace_file), html_file = std::move(html_file),
                           print_table](profiler::Profile& p) { report(p, dir, trace_file, html_file, print_table); }});
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
  static void report(const profiler::Profile& prof, const std::string& dir, const std::string& trace_file,
                     const std::string& html_file, bool print_table) {
    std::filesystem::create_directories(dir);
    const std::string trace = (std::filesystem::path(dir) / trace_file).string();
    const std::string html = (std::filesystem::path(dir) / html_file).string();
    prof.export_chrome_trace(trace);
    prof.export_html(html);
    if (!print_table) return;
    std::printf("\nprofile (after %lld warm-up steps):\n%s",
                static_cast<long long>(kProfileSchedule.wait + kProfileSchedule.warmup),
                prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 20}).c_str());
    std::printf("trace written to %s (open in https://ui.perfetto.dev or chrome://tracing), one step drawn in %s\n",
                trace.c_str(), html.c_str());
  }

  std::optional<profiler::Profile> prof_;
};

}  // namespace kiln::examples
