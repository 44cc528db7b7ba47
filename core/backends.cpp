// core/backends.cpp — the op-kernel route switch (see backends.h).
#include "core/backends.h"

#include <array>

#include "core/kernels.h"

namespace kiln::backends {

namespace {
thread_local std::array<std::optional<bool>, kNumDeviceTypes> t_choice{};
}

bool op_kernels_enabled(DeviceType type, OpFamily family) {
  const std::optional<bool>& choice = t_choice[static_cast<std::size_t>(type)];
  if (choice) return *choice;
  return type != DeviceType::Meta && kernels_for(type).prefers_op_kernels[static_cast<std::size_t>(family)];
}

OpKernelsGuard::OpKernelsGuard(DeviceType type, bool enabled)
    : type_(type), previous_(t_choice[static_cast<std::size_t>(type)]) {
  t_choice[static_cast<std::size_t>(type)] = enabled;
}

OpKernelsGuard::~OpKernelsGuard() { t_choice[static_cast<std::size_t>(type_)] = previous_; }

}  // namespace kiln::backends
