// profiler/collapsed_stacks.cpp — writing the collapsed stacks (see profiler/collapsed_stacks.h),
// line for line as torch.autograd.profiler_util.EventList.export_stacks does.
#include "profiler/collapsed_stacks.h"

#include "core/error.h"

namespace kiln::profiler {

std::string collapsed_stacks(const std::vector<Event>& events, const std::string& metric) {
  KILN_CHECK_VALUE(metric == "self_cpu_time_total", "metric should be one of: ['self_cpu_time_total'], but got '",
                   metric, "'");
  std::string out;
  for (const Event& e : events) {
    if (e.stack.empty()) continue;
    const std::int64_t us = e.self_ns / 1000;  // PyTorch's int() of a time in microseconds
    if (us <= 0) continue;
    for (auto frame = e.stack.rbegin(); frame != e.stack.rend(); ++frame) {
      if (frame != e.stack.rbegin()) out += ';';
      out += *frame;
    }
    out += ' ' + std::to_string(us) + '\n';
  }
  return out;
}

}  // namespace kiln::profiler
