// core/warning.h — warnings that do not stop the program (PyTorch's TORCH_WARN and
// TORCH_WARN_ONCE), e.g. "pin_memory=true but CUDA is not available". They go to stderr
// unless a handler is installed (tests install one to assert on them).
#pragma once

#include <functional>
#include <string>

namespace kiln {

using WarningHandler = std::function<void(const std::string& message)>;

/// Emits `message` (prefixed "kiln warning: ").
void warn(const std::string& message);
/// Emits `message` the first time `key` is warned about in this process.
void warn_once(const std::string& key, const std::string& message);
/// Replaces where warnings go (nullptr restores stderr); returns the previous handler.
WarningHandler set_warning_handler(WarningHandler handler);
/// Forgets which once-only warnings were given (for tests).
void reset_warnings_given();

}  // namespace kiln
