// profiler/html_report.h — Profile::export_html's page: one step of a profile drawn for people
// who would rather look than read. One self-contained file (inline SVG and CSS, no scripts, no
// fetched fonts or styles, so it opens offline and anywhere):
//  - a timeline of the step in lanes, forward ops, then the backward nodes in the engine's
//    order, then the optimizer's and GradScaler's regions, each nested call a row below its
//    caller; hovering a box shows its name, time and input shapes;
//  - the CPU allocator's curve beneath, on the same time axis, its peak marked;
//  - the step's top ops by self time, with PyTorch's table columns.
// The step drawn is the first "ProfilerStep#N" span recorded (a schedule makes them), else the
// whole recording.
// Read next: profiler/chrome_trace.h (the same events for Perfetto).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/event.h"

namespace kiln::profiler {

/// The page's lanes, top to bottom. Every event of the step is in the lane of its outermost
/// caller inside the step.
enum class Lane : std::uint8_t { Forward, Backward, Optimizer, kCount };

/// The lane of a top-level event: backward nodes are backward, the regions that optim/ and amp/
/// mark ("optimizer.step", "GradScaler.update") optimizer; ops, and the regions of the forward
/// code (a loss's target check, a user's RecordFunction), forward.
Lane lane_of(const Event& top_level);

/// Each lane's box colour (also what the screenshot test looks for), as "#rrggbb".
const char* lane_colour(Lane lane);
/// The memory curve's fill colour, as "#rrggbb".
const char* memory_colour();

/// The whole page.
std::string step_html(const std::vector<Event>& events, const std::vector<MemorySample>& memory,
                      std::int64_t initial_allocated);

}  // namespace kiln::profiler
