// core/grad_mode.cpp — the thread-local grad mode.
#include "core/grad_mode.h"

namespace kiln {

namespace {
thread_local bool g_grad_enabled = true;
}

bool is_grad_enabled() { return g_grad_enabled; }
bool& detail::grad_enabled_flag() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }

}  // namespace kiln
