// core/warning.cpp — warnings and the once-only registry.
#include "core/warning.h"

#include <iostream>
#include <mutex>
#include <set>
#include <utility>

namespace kiln {

namespace {
std::mutex g_mutex;
WarningHandler g_handler;
std::set<std::string> g_given;
}  // namespace

void warn(const std::string& message) {
  WarningHandler handler;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    handler = g_handler;
  }
  if (handler) handler(message);
  else std::cerr << "kiln warning: " << message << "\n";
}

void warn_once(const std::string& key, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_given.insert(key).second) return;
  }
  warn(message);
}

WarningHandler set_warning_handler(WarningHandler handler) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return std::exchange(g_handler, std::move(handler));
}

void reset_warnings_given() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_given.clear();
}

}  // namespace kiln
