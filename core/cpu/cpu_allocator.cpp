// core/cpu/cpu_allocator.cpp — the CPU allocator: 64-byte aligned, with a cache of large
// blocks. See Note [CPU caching allocator].
// Read next: core/storage.h; the GPU counterpart is core/caching_allocator.h.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>

#include "core/allocator.h"
#include "core/capture_hooks.h"
#include "core/error.h"
#include "core/messages.h"
#include "core/profiler_hooks.h"

namespace kiln {

// Note [CPU caching allocator]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// glibc serves large requests with mmap and returns them with munmap, so every fresh large
// tensor is new virtual memory and its first touch page-faults: on this machine class about
// 2.6 GB/s (1.55 us per 4 KiB page) against ~21 GB/s for writing warm memory. A training
// loop allocates the same activation sizes every step, so keeping freed blocks and handing
// them out again removes that cost (LibTorch's CNN step: 42.9 ms -> 29.4 ms). Small blocks are
// cached too: glibc's 64-byte-aligned path (memalign) costs ~470 instructions a call, more
// than the rest of a 1-element add (measured with callgrind).
// Requests are rounded up to one of four size classes per octave (at most 25% slack, and a
// multiple of 64 bytes) and kept in a free list per class. The cache is bounded, and when a
// freed block pushes it past the limit the blocks freed longest ago go back to the system
// (least recently used first). Keeping the newest block instead would let a workload that
// changes sizes (training then evaluating, or Float32 after BFloat16) find the cache full of
// blocks nobody asks for, and page-fault on every fresh block: measured, a Float32 CNN epoch
// after a BFloat16 one took 10.0 s instead of 4.7 s.
// The bookkeeping lives inside the free blocks themselves (every block is at least 64
// bytes), so caching a block allocates nothing.

namespace {

std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

/// Multiples of 64 bytes up to 256, then four classes per octave: 1, 1.25, 1.5, 1.75 times
/// a power of two (each a multiple of 64).
std::size_t size_class(std::size_t n) {
  if (n <= 256) return round_up(n, kCpuAlignment);
  const std::size_t p = std::size_t{1} << (63 - __builtin_clzll(n));
  return round_up(n, p / 4);
}

/// The position of a size class (a value of size_class()) in a flat table: 64..256 bytes
/// are classes 1-4, then four per octave. No hashing on the allocation path.
std::size_t class_index(std::size_t size) {
  if (size <= 256) return size / kCpuAlignment;
  const int log = 63 - __builtin_clzll(size);             // size = 2^log * (1 + quarter / 4)
  const std::size_t quarter = (size >> (log - 2)) & 3;
  return 5 + static_cast<std::size_t>(log - 8) * 4 + quarter;
}
constexpr std::size_t kNumClasses = 5 + (64 - 8) * 4;

/// The links of a cached block, written into its first bytes while it is free.
struct FreeBlock {
  FreeBlock* older = nullptr;  // all cached blocks, ordered by when they were freed
  FreeBlock* newer = nullptr;
  FreeBlock* class_next = nullptr;  // cached blocks of the same size class
  FreeBlock* class_prev = nullptr;
  std::size_t size = 0;
};
static_assert(sizeof(FreeBlock) <= kCpuAlignment);

class CpuCachingAllocator final : public Allocator {
 public:
  DataPtr allocate(std::size_t nbytes) override {
    // A replayed step serves its kernels' own temporaries from planned scratch (no request here).
    if (capture::ScratchSource* scratch = capture::scratch_source(); scratch != nullptr && nbytes > 0) {
      if (DataPtr p = scratch->allocate(nbytes); p.get() != nullptr) return p;
    }
    stats_allocations_.fetch_add(1, std::memory_order_relaxed);
    if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, kCPU);
    const std::size_t size = size_class(nbytes);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (FreeBlock* block = classes_[class_index(size)]) {  // the most recently freed of its class
        unlink(block);
        p = block;
        ++cache_hits_;
      } else {
        ++cache_misses_;
      }
    }
    const bool miss = p == nullptr;
    if (miss) p = fresh(size);
    const std::int64_t now = note_allocated(size);
    if (miss) note_reserved();
    if (profiler::MemoryObserver* o = profiler::memory_observer()) [[unlikely]] {
      o->memory_event(p, static_cast<std::int64_t>(size), now);
    }
    return DataPtr(p, size_to_context(size), &release, kCPU);
  }

  CpuAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    CpuAllocatorStats s;
    s.allocated_bytes = allocated_.load(std::memory_order_relaxed);
    s.peak_allocated_bytes = peak_.load(std::memory_order_relaxed);
    s.cached_bytes = cached_bytes_;
    s.reserved_bytes = s.allocated_bytes + cached_bytes_;
    s.peak_reserved_bytes = std::max(peak_reserved_, s.reserved_bytes);
    s.allocations = stats_allocations_.load(std::memory_order_relaxed);
    s.cache_hits = cache_hits_;
    s.cache_misses = cache_misses_;
    s.cache_evictions = evictions_;
    return s;
  }

  void reset_peak_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = allocated_.load(std::memory_order_relaxed);
    peak_.store(now, std::memory_order_relaxed);
    peak_reserved_ = now + cached_bytes_;
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    trim_to(0);
  }

  void set_limit(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = bytes;
    trim_to(limit_);
  }

  std::size_t limit() {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_;
  }

  static CpuCachingAllocator& instance() {
    // Leaked on purpose: tensors in static objects may be freed after main() returns.
    static auto* allocator = new CpuCachingAllocator();
    return *allocator;
  }

 private:
  static void* size_to_context(std::size_t size) { return reinterpret_cast<void*>(size); }
  static std::size_t context_to_size(void* ctx) { return reinterpret_cast<std::size_t>(ctx); }

  static void* fresh(std::size_t size) {
    void* p = std::aligned_alloc(kCpuAlignment, size);
    if (p == nullptr) {
      instance().empty_cache();
      p = std::aligned_alloc(kCpuAlignment, size);
    }
    KILN_CHECK(p != nullptr, msg::cpu_out_of_memory(size));
    return p;
  }

  /// Returns allocated_bytes after this allocation.
  std::int64_t note_allocated(std::size_t size) {
    const auto now =
        allocated_.fetch_add(static_cast<std::int64_t>(size), std::memory_order_relaxed) +
        static_cast<std::int64_t>(size);
    auto peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    return now;
  }

  /// Only a fresh block grows allocated + cached (a cache hit moves bytes from one to the
  /// other; a release the other way; eviction shrinks it).
  void note_reserved() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_reserved_ = std::max(peak_reserved_, allocated_.load(std::memory_order_relaxed) + cached_bytes_);
  }

  static void release(void* ctx, void* data) {
    auto& self = instance();
    const std::size_t size = context_to_size(ctx);
    const auto bytes = static_cast<std::int64_t>(size);
    const std::int64_t now = self.allocated_.fetch_sub(bytes, std::memory_order_relaxed) - bytes;
    if (profiler::MemoryObserver* o = profiler::memory_observer()) [[unlikely]] o->memory_event(data, -bytes, now);
    std::lock_guard<std::mutex> lock(self.mutex_);
    self.push(new (data) FreeBlock{.size = size});
    self.trim_to(self.limit_);
  }

  /// Caches `block` as the newest of all and of its class. Needs mutex_.
  void push(FreeBlock* block) {
    block->older = newest_;
    if (newest_ != nullptr) newest_->newer = block;
    newest_ = block;
    if (oldest_ == nullptr) oldest_ = block;
    FreeBlock*& head = classes_[class_index(block->size)];
    block->class_next = head;
    if (head != nullptr) head->class_prev = block;
    head = block;
    cached_bytes_ += static_cast<std::int64_t>(block->size);
  }

  /// Removes `block` from both lists. Needs mutex_.
  void unlink(FreeBlock* block) {
    (block->newer != nullptr ? block->newer->older : newest_) = block->older;
    (block->older != nullptr ? block->older->newer : oldest_) = block->newer;
    if (block->class_next != nullptr) block->class_next->class_prev = block->class_prev;
    if (block->class_prev != nullptr) block->class_prev->class_next = block->class_next;
    else classes_[class_index(block->size)] = block->class_next;
    cached_bytes_ -= static_cast<std::int64_t>(block->size);
  }

  /// Frees the least recently cached blocks until at most `bytes` stay cached. Needs mutex_.
  void trim_to(std::size_t bytes) {
    while (oldest_ != nullptr && static_cast<std::size_t>(cached_bytes_) > bytes) {
      FreeBlock* victim = oldest_;
      unlink(victim);
      std::free(victim);
      ++evictions_;
    }
  }

  std::mutex mutex_;
  std::array<FreeBlock*, kNumClasses> classes_{};  // per size class: the most recently freed
  FreeBlock* newest_ = nullptr;
  FreeBlock* oldest_ = nullptr;
  std::int64_t cached_bytes_ = 0;
  std::int64_t peak_reserved_ = 0;
  std::int64_t cache_hits_ = 0;
  std::int64_t cache_misses_ = 0;
  std::int64_t evictions_ = 0;
  std::size_t limit_ = std::size_t{1} << 30;
  std::atomic<std::int64_t> allocated_{0};
  std::atomic<std::int64_t> peak_{0};
  std::atomic<std::int64_t> stats_allocations_{0};
};

}  // namespace

namespace cpu {
Allocator* cpu_allocator() { return &CpuCachingAllocator::instance(); }
}  // namespace cpu

CpuAllocatorStats cpu_allocator_stats() { return CpuCachingAllocator::instance().stats(); }
void cpu_empty_cache() { CpuCachingAllocator::instance().empty_cache(); }
void cpu_reset_peak_stats() { CpuCachingAllocator::instance().reset_peak_stats(); }
std::size_t cpu_allocation_size(std::size_t nbytes) { return nbytes == 0 ? 0 : size_class(nbytes); }
void set_cpu_cache_limit(std::size_t bytes) { CpuCachingAllocator::instance().set_limit(bytes); }
std::size_t cpu_cache_limit() { return CpuCachingAllocator::instance().limit(); }

}  // namespace kiln
