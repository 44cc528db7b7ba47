// profiler/record_function.h — torch.profiler.record_function: marks a span of the caller's
// own code (a training step, a data-loading phase) on the profile's timeline. Costs one test
// of a thread-local pointer when no profiler records.
//
//   for (int step = 0; step < 3; ++step) {
//     profiler::RecordFunction mark("ProfilerStep#" + std::to_string(step));
//     train_step();
//   }
//
// Read next: profiler/profile.h.
#pragma once

#include <string>

#include "core/profiler_hooks.h"

namespace kiln::profiler {

class RecordFunction {
 public:
  /// The profiler copies `name` when it records; nothing is copied otherwise.
  explicit RecordFunction(const std::string& name) : observer_(observer()) {
    if (observer_ != nullptr) observer_->region_begin(name.c_str());
  }
  ~RecordFunction() {
    if (observer_ != nullptr) observer_->region_end();
  }
  RecordFunction(const RecordFunction&) = delete;
  RecordFunction& operator=(const RecordFunction&) = delete;

 private:
  Observer* observer_;
};

}  // namespace kiln::profiler
