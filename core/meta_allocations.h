// core/meta_allocations.h — watching the meta device allocate. A meta tensor has no bytes, but
// the op that made it asked for a number of them; an observer installed here hears every such
// request and the matching release, in program order. kiln::memory::plan replays what it hears
// through a real device's allocator algorithm to predict a training step's memory before any
// of it exists. See Note [Planning on the meta device] in memory/plan.h.
// Read next: core/storage.cpp (where meta storages report to the observer).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
#include "core/array_ref.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/provenance.h"
#include "core/scoped_value.h"

namespace kiln {

/// One meta-device allocation as its creator described it.
struct MetaAllocation {
  std::size_t nbytes = 0;
  const MemoryProvenance* provenance = nullptr;  // the op or creation function, and its call site
  IntArrayRef sizes;                             // the tensor it was made for, when known
  DType dtype = DType::UInt8;
  bool described = false;  // false: only the byte count is known
};

class MetaAllocationObserver {
 public:
  virtual ~MetaAllocationObserver() = default;
  /// A meta storage of `allocation.nbytes` (> 0) was created; the returned id comes back
  /// in released() when the storage dies.
  virtual std::uint64_t allocated(const MetaAllocation& allocation) = 0;
  virtual void released(std::uint64_t id) = 0;
};

/// Installs `observer` for the whole process (nullptr removes it) and returns the previous
/// one. Storages created under an observer report their release to it only while it is still
/// the one installed. One planning run at a time: the observer is called from whichever
/// thread allocates, without a lock of its own.
MetaAllocationObserver* set_meta_allocation_observer(MetaAllocationObserver* observer);

/// The device type a meta tensor stands for while a step is planned on this thread: CPU or
/// CUDA when a planning run has said so, Meta otherwise. The routes (core/routes.h) and
/// autocast decide for a meta tensor as they would for this device type, and the meta kernel
/// table mirrors its table (Note [The meta device is a backend] in core/meta/register.cpp),
/// so the planned step allocates what the real one would.
DeviceType meta_stands_for();

/// Where a wrapped number (the tensor a Scalar operand becomes) lives: the CPU, or the meta
/// device while meta stands for the CPU, so that a step planned for the CPU counts those
/// allocations as the real step makes them.
inline Device wrapped_number_device() { return meta_stands_for() == DeviceType::CPU ? kMeta : kCPU; }

/// The device type whose routes and autocast ops use for a tensor on `device`.
inline DeviceType route_device_type(Device device) {
  return device.is_meta() ? meta_stands_for() : device.type();
}

/// While alive, meta tensors stand for `type` (nesting restores the previous one).
class MetaStandsForGuard {
 public:
  explicit MetaStandsForGuard(DeviceType type);

 private:
  ScopedValue<DeviceType> stands_for_;
};

/// The DataPtr of a new meta storage: empty, or, while an observer is installed, one whose
/// release the observer hears of. Called by Storage::allocate for the meta device.
DataPtr meta_data_ptr(const MetaAllocation& allocation);

}  // namespace kiln
