// core/error.cpp — formatting of Kiln's exceptions.
#include "core/error.h"

#include <cstring>

namespace kiln {

namespace {

// "/work/main/core/ops/binary.cpp" -> "core/ops/binary.cpp": the path inside the project is
// what a reader can open; the build machine's prefix is noise.
const char* short_path(const char* file) {
  for (const char* top : {"/core/", "/autograd/", "/nn/", "/optim/", "/amp/", "/data/",
                          "/examples/", "/tests/"}) {
    if (const char* p = std::strstr(file, top)) return p + 1;
  }
  return file;
}

std::string full_text(const std::string& message, std::source_location where) {
  return detail::str_cat(message, "\nException raised from ", where.function_name(), " at ",
                         short_path(where.file_name()), ":", where.line());
}

}  // namespace

Error::Error(std::string message, std::source_location where)
    : std::runtime_error(full_text(message, where)), message_(std::move(message)) {}

}  // namespace kiln
