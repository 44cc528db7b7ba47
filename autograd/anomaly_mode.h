// autograd/anomaly_mode.h — DetectAnomalyGuard: while it lives, every recorded op keeps a
// trace of where it was called, and backward checks each node's gradients for NaN:
//
//   kiln::autograd::DetectAnomalyGuard anomaly;
//   auto y = x.log();            // x holds a negative number
//   y.sum().backward();          // Function 'LogBackward0' returned nan values in its 0th output.
//                                // + the forward op and where it was called
// Read next: autograd/engine.h.
#pragma once

#include <string>

namespace kiln::autograd {

bool is_anomaly_enabled();

class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard();
  ~DetectAnomalyGuard();
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool previous_;
};

/// A readable call stack of the current thread (demangled function names), skipping Kiln's
/// own frames, for the anomaly report of the op being recorded.
std::string capture_trace(const char* op_name);

}  // namespace kiln::autograd
