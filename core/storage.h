// core/storage.h — Storage: one allocation (bytes, device, how to free them), the record of
// how those bytes came to be, and the version counter every tensor over them shares.
// Views share one Storage; copies get a new one. See Note [Version counters].
// Read next: core/tensor_impl.h (a Storage seen through sizes, strides and an offset).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "core/allocator.h"
#include "core/array_ref.h"
#include "core/dtype.h"
#include "core/provenance.h"

namespace kiln {

// Note [Version counters]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Autograd saves tensors for backward and must notice when their bytes were overwritten in
// between (an in-place op under NoGradGuard, or through a view). Every in-place op bumps a
// counter; a saved tensor remembers the value at save time and backward compares. PyTorch
// keeps the counter beside the tensor and shares it between a view and its base; Kiln keeps
// it in the Storage, which views and detach() already share, so "same bytes" and "same
// counter" cannot drift apart. See autograd/saved_variable.h for the check.

class Storage {
 public:
  Storage(DataPtr data, std::size_t nbytes, bool pinned, MemoryProvenance provenance)
      : data_(std::move(data)), nbytes_(nbytes), pinned_(pinned), provenance_(provenance) {}

  /// Fresh memory from the allocator for `device`.
  static std::shared_ptr<Storage> allocate(std::size_t nbytes, Device device, bool pinned,
                                           MemoryProvenance provenance);
  /// Fresh memory for a contiguous tensor of `sizes` and `dtype` (what a meta-device
  /// observer is told it stands for).
  static std::shared_ptr<Storage> allocate_for(IntArrayRef sizes, DType dtype, Device device, bool pinned,
                                               MemoryProvenance provenance);

  void* data() const { return data_.get(); }
  /// Puts `data` (as many bytes, on the same device) in place of this storage's bytes and
  /// returns the old ones (PyTorch's StorageImpl::set_data_ptr): every tensor over the storage
  /// reads the new bytes. How a compiled step's returned value, which borrowed the graph's
  /// buffer, comes to own a copy (Note [What a replay returns] in compile/lent_outputs.h).
  DataPtr set_data_ptr(DataPtr data) {
    DataPtr old = std::move(data_);
    data_ = std::move(data);
    return old;
  }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }
  bool is_pinned() const { return pinned_; }
  const MemoryProvenance& provenance() const { return provenance_; }

  std::uint32_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  DataPtr data_;
  std::size_t nbytes_;
  bool pinned_;
  MemoryProvenance provenance_;
  std::atomic<std::uint32_t> version_{0};
};

}  // namespace kiln
