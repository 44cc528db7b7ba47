// core/error.h — Kiln's exceptions and the KILN_CHECK family that throws them.
// The first line of every message is PyTorch's text where PyTorch has one, so a search for
// it finds the explanation; "Exception raised from <function> at <file>:<line>" follows on a
// later line. Canonical texts shared by several ops are built in core/messages.h.
// Read next: core/messages.h.
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

/// Base of every error a user can cause. `what()` is the full text; `message()` is the
/// first part alone (what PyTorch would print), without the raise site.
class Error : public std::runtime_error {
 public:
  Error(std::string message, std::source_location where);
  const std::string& message() const noexcept { return message_; }

 private:
  std::string message_;
};

/// PyTorch raises IndexError for out-of-range dimensions and indices.
class IndexError : public Error { using Error::Error; };
/// Invalid values: a negative size, a probability outside [0, 1], a bad file.
class ValueError : public Error { using Error::Error; };
/// Wrong dtypes or argument kinds.
class TypeError : public Error { using Error::Error; };
/// A kernel that does not exist for a dtype or device.
class NotImplementedError : public Error { using Error::Error; };
/// A device (or the caching allocator's arena) that cannot serve an allocation
/// (torch.cuda.OutOfMemoryError).
class OutOfMemoryError : public Error { using Error::Error; };

namespace detail {

template <class... Parts>
std::string str_cat(const Parts&... parts) {
  if constexpr (sizeof...(Parts) == 0) {
    return {};
  } else {
    std::ostringstream os;
    (os << ... << parts);
    return os.str();
  }
}

template <class E, class... Parts>
[[noreturn]] void throw_error(std::source_location where, const Parts&... parts) {
  throw E(str_cat(parts...), where);
}

}  // namespace detail
}  // namespace kiln

// A macro because the message parts must only be evaluated when the check fails, and the
// raise site must be the caller's line.
#define KILN_CHECK_AS(ErrorType, cond, ...)                                                   \
  do {                                                                                        \
    if (!(cond)) [[unlikely]]                                                                 \
      ::kiln::detail::throw_error<ErrorType>(std::source_location::current() __VA_OPT__(, ) __VA_ARGS__); \
  } while (false)

#define KILN_CHECK(cond, ...) KILN_CHECK_AS(::kiln::Error, cond __VA_OPT__(, ) __VA_ARGS__)
#define KILN_CHECK_INDEX(cond, ...) KILN_CHECK_AS(::kiln::IndexError, cond __VA_OPT__(, ) __VA_ARGS__)
#define KILN_CHECK_VALUE(cond, ...) KILN_CHECK_AS(::kiln::ValueError, cond __VA_OPT__(, ) __VA_ARGS__)
#define KILN_CHECK_TYPE(cond, ...) KILN_CHECK_AS(::kiln::TypeError, cond __VA_OPT__(, ) __VA_ARGS__)
#define KILN_CHECK_NOT_IMPLEMENTED(cond, ...) \
  KILN_CHECK_AS(::kiln::NotImplementedError, cond __VA_OPT__(, ) __VA_ARGS__)
#define KILN_FAIL(...) KILN_CHECK(false __VA_OPT__(, ) __VA_ARGS__)
