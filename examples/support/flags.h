// examples/support/flags.h — the programs' command lines: every flag declared once, with its
// type, its range and its help text, on CLI11 (Debian's libcli11-dev); every value checked
// before any work starts; and one error boundary for main(), so that whatever a user types
// ends in one line "program: what was expected, what was found" and an exit status, never a
// signal or a stack of messages. See Note [Flags are checked before work].
// Read next: examples/support/training.h (the flags every training program shares).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "kiln.h"

namespace kiln::examples {

// Note [Flags are checked before work]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A value found wrong an hour into a run costs the hour: an unwritable --checkpoint used to be
// found only when the trained weights were written, and lost them. So each flag's check is
// part of its declaration (a range, a list of choices, a file that must exist, a path that
// must be writable) and runs while the command line is parsed, before data is read or a model
// built. The ranges are wide enough for any real run and narrow enough that a typo (a minus
// sign, a missing decimal point, 1e12 for 1e2) is refused instead of crashing a thread pool or
// an allocator later. Writability is tested by doing it: creating and removing a probe file
// where the output will go, since permission bits say nothing about a read-only filesystem
// or, for root, anything at all.

/// A bad command line. The error boundary reports it as "program: message" with exit status 2
/// (the shell's convention for usage errors); other failures exit with 1.
class FlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace flag_checks {

/// Whole-string integer parsing: "3x", "1e3", "" and out-of-range values are all refused.
inline bool parse_integer(const std::string& text, std::int64_t& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, out);
  return error == std::errc() && ptr == end && !text.empty();
}

inline bool parse_number(const std::string& text, double& out) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, out);
  return error == std::errc() && ptr == end && !text.empty() && std::isfinite(out);
}

/// An integer in [lo, hi].
inline CLI::Validator integer(std::int64_t lo, std::int64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        std::int64_t v = 0;
        if (parse_integer(value, v) && v >= lo && v <= hi) return {};
        return "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got '" + value +
               "'";
      },
      range);
}

/// A finite number in (lo, hi] when `exclusive_lo`, else [lo, hi].
inline CLI::Validator number(double lo, double hi, bool exclusive_lo = false) {
  auto show = [](double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", x);
    return std::string(text);
  };
  const std::string range = (exclusive_lo ? "(" : "[") + show(lo) + "," + show(hi) + "]";
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        double v = 0;
        if (parse_number(value, v) && (exclusive_lo ? v > lo : v >= lo) && v <= hi) return {};
        return std::string("expected a number ") + (exclusive_lo ? "greater than " : "from ") + show(lo) +
               (exclusive_lo ? " and at most " : " to ") + show(hi) + ", got '" + value + "'";
      },
      range);
}

/// One of `choices`.
inline CLI::Validator one_of(std::vector<std::string> choices) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : "|") + c;
  return CLI::Validator(
      [choices, list](std::string& value) -> std::string {
        for (const std::string& c : choices) {
          if (value == c) return {};
        }
        return "expected one of " + list + ", got '" + value + "'";
      },
      list);
}

/// A device name Kiln knows: cpu, cuda, cuda:N.
inline CLI::Validator device() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          const Device d(value);
          if (d.is_cpu() || d.is_cuda()) return {};
        } catch (const Error&) {
        }
        return "expected cpu, cuda or cuda:N, got '" + value + "'";
      },
      "cpu|cuda|cuda:N");
}

/// Why `folder` cannot take a new file, or "" when it can (Note [Flags are checked before work]).
inline std::string folder_refuses_files(const std::filesystem::path& folder) {
  const std::filesystem::path probe = folder / (".kiln-write-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return {};
}

/// The folder that will hold `path`, or its nearest existing ancestor when the folder is still
/// to be created; "" when that ancestor is not a folder.
inline std::filesystem::path nearest_existing_folder(std::filesystem::path path) {
  namespace fs = std::filesystem;
  path = fs::absolute(path);
  for (; !path.empty(); path = path.parent_path()) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (fs::exists(status)) return fs::is_directory(status) ? path : fs::path();
    if (path == path.root_path()) break;
  }
  return {};
}

/// A file this process can create or replace (its folder exists and takes new files).
inline CLI::Validator writable_file() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        namespace fs = std::filesystem;
        if (value.empty()) return {};  // the flag's "none"
        const fs::path path = fs::absolute(value);
        std::error_code error;
        if (fs::is_directory(path, error)) return "'" + value + "' is a folder, expected a file name";
        const fs::path folder = path.parent_path();
        if (!fs::is_directory(folder, error)) {
          return "cannot write '" + value + "': the folder '" + folder.string() + "' does not exist";
        }
        if (const std::string why = folder_refuses_files(folder); !why.empty()) {
          return "cannot write '" + value + "': " + why;
        }
        return {};
      },
      "OUTPUT_FILE");
}

/// A folder that exists and takes new files, or that can be created (its nearest existing
/// ancestor is a folder that takes new files).
inline CLI::Validator writable_folder() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        namespace fs = std::filesystem;
        if (value.empty()) return {};
        std::error_code error;
        if (fs::exists(value, error) && !fs::is_directory(value, error)) {
          return "'" + value + "' is a file, expected a folder";
        }
        const fs::path existing = nearest_existing_folder(value);
        if (existing.empty()) return "cannot create the folder '" + value + "': a file is in the way";
        if (const std::string why = folder_refuses_files(existing); !why.empty()) {
          return "cannot write into '" + value + "': " + why;
        }
        return {};
      },
      "OUTPUT_DIR");
}

inline CLI::Validator existing_file() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::error_code error;
        if (value.empty() || std::filesystem::is_regular_file(value, error)) return {};
        return "no such file: '" + value + "'";
      },
      "FILE");
}

inline CLI::Validator existing_folder() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::error_code error;
        if (std::filesystem::is_directory(value, error)) return {};
        return "no such folder: '" + value + "'";
      },
      "DIR");
}

/// A file or a folder that exists.
inline CLI::Validator existing_path() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        std::error_code error;
        if (std::filesystem::exists(value, error)) return {};
        return "no such file or folder: '" + value + "'";
      },
      "PATH");
}

}  // namespace flag_checks

/// A program's flags: `--name value` (or `--name=value`) and switches, with --help.
///   std::int64_t epochs = 10;
///   Flags flags("train_mlp", "an MLP on Fashion-MNIST");
///   flags.add("--epochs", epochs, "passes over the training set")->check(flag_checks::integer(1, 1000000));
///   flags.parse(argc, argv);   // inside run_program: a bad value is a FlagError
class Flags {
 public:
  /// Thrown by parse() after printing the help text; run_program returns 0 for it.
  struct HelpShown {};

  Flags(std::string program, const std::string& summary) : program_(std::move(program)), app_(summary, program_) {
    app_.allow_extras();  // reported by parse() in Kiln's words
    app_.set_help_flag("-h,--help", "print this help and exit");
    app_.option_defaults()->always_capture_default();
    // As Python's argparse: a flag given twice takes its last value.
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }

  /// A flag whose value is parsed into `target`; its current value is the default shown.
  template <class T>
  CLI::Option* add(const std::string& name, T& target, const std::string& help) {
    return app_.add_option(name, target, help);
  }
  /// A flag whose value goes through `assign` (for values such as "auto").
  CLI::Option* add_function(const std::string& name, std::function<void(const std::string&)> assign,
                            const std::string& help, const std::string& shown_default) {
    return app_.add_option_function<std::string>(name, std::move(assign), help)->default_str(shown_default);
  }
  /// A switch: present means on.
  CLI::Option* add_switch(const std::string& name, bool& target, const std::string& help) {
    return app_.add_flag(name, target, help);
  }

  /// Parses argv, checking every value; throws FlagError naming the flag, or HelpShown.
  void parse(int argc, char** argv) {
    try {
      app_.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::printf("%s", app_.help().c_str());
      throw HelpShown{};
    } catch (const CLI::ArgumentMismatch& e) {
      throw FlagError(flag_of(e.what()) + ": needs a value");
    } catch (const CLI::ParseError& e) {
      throw FlagError(e.what());
    }
    const std::vector<std::string> extra = app_.remaining();
    if (!extra.empty()) {
      const std::string& first = extra.front();
      throw FlagError((first.rfind("-", 0) == 0 ? "unknown flag '" : "unexpected argument '") + first +
                      "' (see --help)");
    }
  }

  /// Whether the user gave `name` on the command line (rather than leaving its default).
  bool given(const std::string& name) const { return app_.count(name) > 0; }
  const std::string& program() const { return program_; }

 private:
  static std::string flag_of(const std::string& message) { return message.substr(0, message.find(':')); }

  std::string program_;
  CLI::App app_;
};

/// Runs main()'s body inside the programs' one error boundary: every failure is one line
/// "program: message" on stderr, exit status 2 for a bad command line and 1 otherwise.
template <class Body>
int run_program(const char* program, Body body) {
  auto report = [program](const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", program, message.c_str());
  };
  try {
    return body();
  } catch (const Flags::HelpShown&) {
    return 0;
  } catch (const FlagError& e) {
    report(e.what());
    return 2;
  } catch (const Error& e) {
    report(e.message());
  } catch (const std::bad_alloc&) {
    report("out of memory (std::bad_alloc): the run asked for more memory than the machine could give; try a "
           "smaller --batch-size");
  } catch (const std::exception& e) {
    report(e.what());
  } catch (...) {
    report("stopped by an exception that is not a std::exception");
  }
  return 1;
}

}  // namespace kiln::examples
