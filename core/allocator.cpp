// core/allocator.cpp — choosing the allocator for a device.
#include "core/allocator.h"

#include "core/cuda/cuda.h"
#include "core/error.h"

namespace kiln {

namespace cpu {
Allocator* cpu_allocator();  // core/cpu/cpu_allocator.cpp
}

namespace {

/// The meta device has shapes but no bytes: every allocation is empty.
class MetaAllocator final : public Allocator {
 public:
  DataPtr allocate(std::size_t) override { return DataPtr(nullptr, nullptr, nullptr, kMeta); }
};

}  // namespace

Allocator* allocator_for(Device device, bool pinned) {
  switch (device.type()) {
    case DeviceType::CPU: return pinned ? cuda::host_allocator() : cpu::cpu_allocator();
    case DeviceType::CUDA:
      KILN_CHECK(!pinned, "Only dense CPU tensors can be pinned (asked for pinned memory on ",
                 device, ")");
      return cuda::device_allocator(device.index());
    case DeviceType::Meta: {
      static MetaAllocator meta;
      return &meta;
    }
  }
  KILN_FAIL("unknown device type");
}

}  // namespace kiln
