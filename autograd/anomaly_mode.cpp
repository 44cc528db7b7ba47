// autograd/anomaly_mode.cpp — anomaly detection state and call-stack capture.
// Stacks come from core/call_stack.h; function names need the program linked with -rdynamic
// (Kiln's tests and examples are), and file:line needs a debugger or addr2line.
#include "autograd/anomaly_mode.h"

#include <sstream>

#include "core/call_stack.h"

namespace kiln::autograd {

namespace {
thread_local bool t_anomaly = false;
}  // namespace

bool is_anomaly_enabled() { return t_anomaly; }

DetectAnomalyGuard::DetectAnomalyGuard() : previous_(t_anomaly) { t_anomaly = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { t_anomaly = previous_; }

std::string capture_trace(const char* op_name) {
  void* frames[32];
  const int n = capture_call_stack(frames);
  const std::vector<std::string> names = symbolize_frames(std::span<void* const>(frames, static_cast<std::size_t>(n)));
  std::ostringstream os;
  os << "the forward op '" << op_name << "' was called from:";
  int shown = 0;
  for (std::size_t i = 1; i < names.size() && shown < 8; ++i) {
    const std::string& f = names[i];
    // Kiln's own recording machinery is noise; the user's frames are what matter.
    if (f.find("kiln::autograd::Function") != std::string::npos ||
        f.find("kiln::autograd::capture_trace") != std::string::npos) {
      continue;
    }
    os << "\n  #" << shown++ << " " << f;
  }
  return os.str();
}

}  // namespace kiln::autograd
