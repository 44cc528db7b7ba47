// autograd/anomaly_mode.cpp — anomaly detection state and call-stack capture.
// Stacks come from glibc's backtrace(); function names need the program linked with
// -rdynamic (Kiln's tests and examples are), and file:line needs a debugger or addr2line.
#include "autograd/anomaly_mode.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <cstdlib>
#include <memory>
#include <sstream>

namespace kiln::autograd {

namespace {
thread_local bool t_anomaly = false;

/// "binary(_ZN4kiln3logERKNS_6TensorE+0x1c) [0x...]" -> "kiln::log(kiln::Tensor const&)".
std::string demangle_frame(const char* frame) {
  std::string s(frame);
  const auto open = s.find('(');
  const auto plus = s.find('+', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || plus == std::string::npos || plus <= open + 1) return s;
  const std::string mangled = s.substr(open + 1, plus - open - 1);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : mangled;
}
}  // namespace

bool is_anomaly_enabled() { return t_anomaly; }

DetectAnomalyGuard::DetectAnomalyGuard() : previous_(t_anomaly) { t_anomaly = true; }
DetectAnomalyGuard::~DetectAnomalyGuard() { t_anomaly = previous_; }

std::string capture_trace(const char* op_name) {
  void* frames[32];
  const int n = backtrace(frames, 32);
  std::unique_ptr<char*, void (*)(void*)> symbols(backtrace_symbols(frames, n), std::free);
  std::ostringstream os;
  os << "the forward op '" << op_name << "' was called from:";
  int shown = 0;
  for (int i = 1; i < n && symbols && shown < 8; ++i) {
    const std::string f = demangle_frame(symbols.get()[i]);
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
