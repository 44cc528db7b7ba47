// profiler/schedule.cpp — PyTorch's schedule_fn, step for step.
#include "profiler/schedule.h"

#include "core/error.h"

namespace kiln::profiler {

ProfilerAction Schedule::operator()(std::int64_t step) const {
  if (step < skip_first) return ProfilerAction::None;
  step -= skip_first;
  const std::int64_t cycle = wait + warmup + active;
  if (repeat > 0 && step / cycle >= repeat) return ProfilerAction::None;
  const std::int64_t in_cycle = step % cycle;
  if (in_cycle < wait) return ProfilerAction::None;
  if (in_cycle < wait + warmup) return ProfilerAction::Warmup;
  return in_cycle < cycle - 1 ? ProfilerAction::Record : ProfilerAction::RecordAndSave;
}

void Schedule::validate() const {
  KILN_CHECK_VALUE(skip_first >= 0 && wait >= 0 && warmup >= 0 && active >= 1 && repeat >= 0,
                   "Invalid profiler schedule arguments: expected skip_first, wait, warmup and repeat >= 0 "
                   "and active >= 1, got skip_first=", skip_first, ", wait=", wait, ", warmup=", warmup,
                   ", active=", active, ", repeat=", repeat);
}

}  // namespace kiln::profiler
