// profiler/op_name.cpp — an op's name from its backward node's (see profiler/op_name.h).
#include "profiler/op_name.h"

#include <cctype>
#include <cstring>
#include <string_view>

namespace kiln::profiler {

std::string op_name_for_node(const char* node_name) {
  std::string_view name(node_name);
  // Strip the last "Backward" when only digits follow it: "ThresholdBackwardBackward0" keeps
  // its first one, as PyTorch's threshold_backward op.
  const std::size_t at = name.rfind("Backward");
  if (at != std::string_view::npos && at > 0) {
    const std::string_view tail = name.substr(at + std::strlen("Backward"));
    bool digits = true;
    for (char c : tail) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) name = name.substr(0, at);
  }
  // CamelCase to snake_case. A capital starts a word after a small letter, or when it ends a
  // run of capitals before a small letter ("2DWith" -> "2d_with"); after a digit it does not,
  // so "Im2Col" reads "im2col" and "MaxPool2D" "max_pool2d", as ATen spells them.
  std::string out = "aten::";
  for (std::size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0) {
      const auto prev = static_cast<unsigned char>(name[i - 1]);
      const bool next_lower = i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1]));
      if (std::islower(prev) || (std::isupper(prev) && next_lower)) out += '_';
    }
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

}  // namespace kiln::profiler
