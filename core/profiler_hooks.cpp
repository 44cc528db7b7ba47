// core/profiler_hooks.cpp — the one hook that needs the operating system: which thread a span
// ran on (see core/profiler_hooks.h).
#include "core/profiler_hooks.h"

#include <unistd.h>

namespace kiln::profiler {

std::int64_t current_thread_id() {
  thread_local const std::int64_t id = static_cast<std::int64_t>(gettid());
  return id;
}

}  // namespace kiln::profiler
