// core/call_stack.cpp — stacks from glibc's backtrace(), named by backtrace_symbols() (the
// dynamic symbol table, hence -rdynamic) and demangled by the C++ ABI's __cxa_demangle.
#include "core/call_stack.h"

#include <cxxabi.h>
#include <execinfo.h>

#include <cstdlib>
#include <memory>

namespace kiln {

namespace {

/// "binary(_ZN4kiln3logERKNS_6TensorE+0x1c) [0x...]" -> "kiln::log(kiln::Tensor const&)".
std::string demangle_frame(const char* frame) {
  std::string s(frame);
  const auto open = s.find('(');
  const auto plus = s.find('+', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || plus == std::string::npos || plus <= open + 1) return s;
  const std::string mangled = s.substr(open + 1, plus - open - 1);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && name ? name.get() : mangled;
}

/// The qualified name of a demangled function, without a template's return type in front and
/// without its argument list: "kiln::Tensor kiln::mul<float>(...)" -> "kiln::mul<float>".
std::string_view qualified_name(std::string_view f) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  constexpr std::string_view kOperator = "operator";
  std::size_t start = 0;
  int angle = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const std::string_view rest = f.substr(i);
    if (rest.starts_with(kAnonymous)) {
      i += kAnonymous.size() - 1;
    } else if (rest.starts_with(kOperator)) {
      // "operator()", "operator<", "operator new": the symbol is not a bracket or a space of the name.
      i += kOperator.size();
      if (f.substr(i).starts_with("()")) ++i;
      while (i + 1 < f.size() && f[i + 1] != '(') ++i;
    } else if (f[i] == '<') {
      ++angle;
    } else if (f[i] == '>') {
      --angle;
    } else if (angle == 0 && f[i] == '(') {
      return f.substr(start, i - start);
    } else if (angle == 0 && f[i] == ' ') {
      start = i + 1;
    }
  }
  return f.substr(start);
}

}  // namespace

int capture_call_stack(std::span<void*> frames) { return backtrace(frames.data(), static_cast<int>(frames.size())); }

std::vector<std::string> symbolize_frames(std::span<void* const> frames) {
  std::vector<std::string> names;
  if (frames.empty()) return names;
  std::unique_ptr<char*, void (*)(void*)> symbols(
      backtrace_symbols(frames.data(), static_cast<int>(frames.size())), std::free);
  names.reserve(frames.size());
  for (std::size_t i = 0; i < frames.size(); ++i) names.push_back(symbols ? demangle_frame(symbols.get()[i]) : "??");
  return names;
}

bool is_kiln_frame(std::string_view frame) {
  const std::string_view name = qualified_name(frame);
  return name.starts_with("kiln::") && !name.starts_with("kiln::examples::");
}

bool is_unnamed_frame(std::string_view frame) { return frame.find("(+0x") != std::string_view::npos; }

}  // namespace kiln
