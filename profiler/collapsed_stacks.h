// profiler/collapsed_stacks.h — PyTorch's export_stacks(): one line per op recorded with a
// stack, its frames outermost first joined by ';' and a metric in microseconds, the "collapsed
// stack" format flamegraph.pl and speedscope read:
//
//   main;train(Net&);step(Net&, kiln::Tensor const&) 1873
//
// Read next: profiler/profile.h (Profile::export_stacks).
#pragma once

#include <string>
#include <vector>

#include "profiler/event.h"

namespace kiln::profiler {

/// The collapsed stacks of `events` weighted by `metric` ("self_cpu_time_total", the only
/// time Kiln's profiler measures on the host); as PyTorch, events whose metric truncates to
/// 0 us are left out.
std::string collapsed_stacks(const std::vector<Event>& events, const std::string& metric);

}  // namespace kiln::profiler
