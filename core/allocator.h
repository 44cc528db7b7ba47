// core/allocator.h — where bytes come from. DataPtr is one allocation plus the function that
// gives it back; Allocator hands out DataPtrs for one kind of memory. The CPU allocator is
// 64-byte aligned and caches freed blocks (see Note [CPU caching allocator]); CUDA device
// and pinned host memory come from core/cuda/.
// Read next: core/storage.h (a DataPtr plus its size, device and provenance).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "core/device.h"

namespace kiln {

/// Frees `data`; `context` is whatever the allocator needs (a size class, an owner object).
using DeleterFn = void (*)(void* context, void* data);

/// One allocation and how to free it. Move-only: exactly one DataPtr owns the bytes.
class DataPtr {
 public:
  DataPtr() = default;
  DataPtr(void* data, void* context, DeleterFn deleter, Device device)
      : data_(data), context_(context), deleter_(deleter), device_(device) {}
  DataPtr(DataPtr&& other) noexcept { swap(other); }
  DataPtr& operator=(DataPtr&& other) noexcept {
    DataPtr(std::move(other)).swap(*this);
    return *this;
  }
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() {
    if (deleter_ != nullptr) deleter_(context_, data_);
  }

  void* get() const { return data_; }
  void* context() const { return context_; }
  DeleterFn deleter() const { return deleter_; }
  Device device() const { return device_; }

 private:
  void swap(DataPtr& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(context_, o.context_);
    std::swap(deleter_, o.deleter_);
    std::swap(device_, o.device_);
  }
  void* data_ = nullptr;
  void* context_ = nullptr;
  DeleterFn deleter_ = nullptr;
  Device device_{DeviceType::CPU};
};

/// A source of memory for one device (and one kind: pageable or pinned).
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(std::size_t nbytes) = 0;
  /// True when memory from here is page-locked host memory (for async copies).
  virtual bool is_pinned() const { return false; }
};

/// The allocator for tensors on `device` (`pinned` selects page-locked host memory).
Allocator* allocator_for(Device device, bool pinned = false);

/// Alignment of every CPU allocation: one cache line, and the widest AVX-512 load.
inline constexpr std::size_t kCpuAlignment = 64;

/// Counters of the CPU allocator, readable from code (see cpu_allocator_stats()).
struct CpuAllocatorStats {
  std::int64_t allocated_bytes = 0;       // in use by tensors now
  std::int64_t peak_allocated_bytes = 0;  // high-water mark of allocated_bytes
  std::int64_t cached_bytes = 0;          // freed blocks kept for reuse
  std::int64_t reserved_bytes = 0;        // allocated + cached: what the allocator holds
  std::int64_t peak_reserved_bytes = 0;   // high-water mark of reserved_bytes
  std::int64_t allocations = 0;           // every allocate() call
  std::int64_t cache_hits = 0;            // requests served from the cache
  std::int64_t cache_misses = 0;          // requests that needed fresh memory
  std::int64_t cache_evictions = 0;       // cached blocks given back to the system
};

CpuAllocatorStats cpu_allocator_stats();
/// Returns every cached CPU block to the system.
void cpu_empty_cache();
/// Restarts the peak figures from the current ones (torch.cuda.reset_peak_memory_stats).
void cpu_reset_peak_stats();
/// The bytes a CPU request of `nbytes` occupies: its size class (Note [CPU caching allocator]).
std::size_t cpu_allocation_size(std::size_t nbytes);
/// Largest number of bytes the CPU cache may hold (default 1 GiB); lowering it trims now.
void set_cpu_cache_limit(std::size_t bytes);
std::size_t cpu_cache_limit();

}  // namespace kiln
