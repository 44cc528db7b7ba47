// core/capture_hooks.cpp — installing a capture observer (see core/capture_hooks.h).
#include "core/capture_hooks.h"

#include <atomic>

#include "core/tensor.h"

namespace kiln::capture {

Observer* set_observer(Observer* o) { return std::exchange(detail::t_observer, o); }

void host_access(const Tensor& t, const char* how, std::source_location where) {
  if (Observer* o = observer()) o->host_access(t, how, where);
}

namespace {
std::atomic<std::uint64_t> changes{0};
}  // namespace

void held_state_changed() { changes.fetch_add(1, std::memory_order_relaxed); }
std::uint64_t held_state_changes() { return changes.load(std::memory_order_relaxed); }

}  // namespace kiln::capture
