// core/capture_hooks.cpp — installing a capture observer (see core/capture_hooks.h).
#include "core/capture_hooks.h"

#include "core/tensor.h"

namespace kiln::capture {

Observer* set_observer(Observer* o) {
  Observer* previous = detail::t_observer;
  detail::t_observer = o;
  return previous;
}

void host_access(const Tensor& t, const char* how, std::source_location where) {
  if (Observer* o = observer()) o->host_access(t, how, where);
}

}  // namespace kiln::capture
