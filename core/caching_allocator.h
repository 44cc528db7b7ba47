// core/caching_allocator.h — the caching allocator behind CUDA device memory, written once
// for any device: it asks a MemoryBackend for big segments (cudaMalloc on a GPU, a bounded
// host arena in tests and in the failure-case demos) and carves tensors out of them. See
// Note [Caching allocator].
//
//   kiln::BoundedHostArena arena(64 << 20);              // a pretend 64 MiB device
//   kiln::CachingAllocator cache(arena);
//   void* p = cache.allocate(3 << 20, /*stream=*/0);
//   cache.free(p);                                        // cached, not returned
//   std::cout << cache.memory_summary();
//
// Read next: core/caching_allocator.cpp; the CUDA backend is core/cuda/device_allocator.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

namespace kiln {

// Note [Caching allocator]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// cudaMalloc and cudaFree are slow (cudaFree synchronises the device), and a training step
// allocates and frees the same activation sizes every iteration. So, like PyTorch's
// CUDACachingAllocator, Kiln never returns freed memory to the driver on its own: it keeps
// segments and reuses their blocks.
//  - Sizes are rounded up to multiples of 512 bytes. Requests up to 1 MiB are "small" and come
//    from 2 MiB segments; larger ones from 20 MiB segments, or (at 10 MiB and above) from a
//    segment of their own size rounded up to 2 MiB. Small and large blocks never mix.
//  - A request takes the smallest cached free block that fits (best fit) on the same stream:
//    a block freed on one stream is only reused by that stream, since work queued there may
//    still be using it. A larger block is split, and the remainder stays cached (small
//    blocks split when 512 bytes or more remain, large ones when more than 1 MiB remains).
//  - A freed block merges with free neighbours in its segment, so splitting is undone as
//    soon as the pieces are free again.
//  - When the backend has no room for a new segment, every cached segment that is wholly
//    free is returned and the request retried; if that fails too it is an out-of-memory
//    error whose message separates memory in use from memory cached but unusable.
//  - Fragmentation: a segment with one live block cannot be returned, and its free pieces
//    only serve requests that fit in them. Many small tensors created in a loop can leave
//    memory reserved but in pieces too small for the next large request; memory_summary()
//    shows it ("largest free block" against all free cached bytes), reusing buffers
//    (copy_/fill_ into an existing tensor) avoids it, and max_split_size (below) limits it.
//  - KILN_CUDA_ALLOC_CONF=max_split_size_mb:N (PyTorch's PYTORCH_CUDA_ALLOC_CONF knob): blocks
//    larger than N MiB are never split, so big cached blocks are not nibbled away by small
//    requests.
// The algorithm knows nothing of CUDA; tests/core/test_caching_allocator.cpp runs it on a
// BoundedHostArena.

/// Where segments come from: cudaMalloc/cudaFree on a GPU, or a bounded host arena.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  /// A new segment of exactly `nbytes`, or nullptr when the device has no room.
  virtual void* allocate_segment(std::size_t nbytes) = 0;
  virtual void free_segment(void* ptr, std::size_t nbytes) = 0;
  /// The device's total memory and what it reports free now (for OOM messages).
  virtual std::size_t total_bytes() const = 0;
  virtual std::size_t free_bytes() const = 0;
  /// "GPU 0", "arena": how messages name the device.
  virtual std::string name() const = 0;
  /// The device type named in messages ("CUDA").
  virtual std::string kind() const { return "CUDA"; }
};

/// A pretend device of `capacity` bytes carved out of host memory: segments are placed
/// first-fit in one fixed block, so a full arena refuses new segments exactly as a full GPU
/// does. Tensors can live in it (the memory is real), which the tests and the failure-case
/// demo use.
class BoundedHostArena final : public MemoryBackend {
 public:
  explicit BoundedHostArena(std::size_t capacity, std::string name = "arena");
  ~BoundedHostArena() override;
  void* allocate_segment(std::size_t nbytes) override;
  void free_segment(void* ptr, std::size_t nbytes) override;
  std::size_t total_bytes() const override { return capacity_; }
  std::size_t free_bytes() const override;
  std::string name() const override { return name_; }
  std::size_t segments() const;

 private:
  std::size_t capacity_;
  std::string name_;
  std::unique_ptr<std::byte[]> memory_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::size_t> free_;  // offset -> size, coalesced
  std::map<std::size_t, std::size_t> used_;  // offset -> size
};

struct CachingAllocatorConfig {
  /// Blocks larger than this are never split (bytes; SIZE_MAX = no limit).
  std::size_t max_split_size = SIZE_MAX;
  /// Parses "max_split_size_mb:128" (PyTorch's syntax; comma-separated key:value pairs).
  /// Unknown keys and bad values are errors naming the variable.
  static CachingAllocatorConfig parse(const std::string& text, const std::string& variable = "KILN_CUDA_ALLOC_CONF");
  /// The configuration from the KILN_CUDA_ALLOC_CONF environment variable (defaults if unset).
  static CachingAllocatorConfig from_environment();
};

/// Current, peak, and lifetime totals of one quantity (PyTorch's Stat).
struct Stat {
  std::int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(std::int64_t amount);
  void decrease(std::int64_t amount);
  void reset_peak() { peak = current; }
};

/// PyTorch's memory_stats() figures, for the whole device (small and large pools together,
/// and each pool separately where PyTorch reports it).
struct MemoryStats {
  Stat allocated_bytes;       // bytes in blocks handed out (rounded sizes)
  Stat requested_bytes;       // bytes the callers asked for
  Stat reserved_bytes;        // bytes in segments obtained from the backend
  Stat active_bytes;          // same as allocated: Kiln frees blocks at once
  Stat inactive_split_bytes;  // free bytes inside segments that also hold live blocks
  Stat allocations;           // live blocks
  Stat segments;              // live segments
  Stat oversize_allocations;  // live blocks larger than max_split_size
  Stat oversize_segments;
  Stat small_pool_allocated_bytes, large_pool_allocated_bytes;
  Stat small_pool_reserved_bytes, large_pool_reserved_bytes;
  std::int64_t num_alloc_retries = 0;  // times cached segments were released to retry
  std::int64_t num_ooms = 0;
  std::int64_t largest_free_block = 0;  // bytes, among cached free blocks
  std::int64_t cached_free_bytes = 0;   // all cached free bytes (reserved - allocated)
  /// 1 - largest_free_block / cached_free_bytes: 0 when the free cache is one block, near 1
  /// when it is in many small pieces.
  double fragmentation() const;
};

/// One stream's identity (a cudaStream_t's address on a GPU; 0 is the default stream).
using StreamId = std::uintptr_t;

class CachingAllocator {
 public:
  static constexpr std::size_t kMinBlockSize = 512;
  static constexpr std::size_t kSmallSize = 1 << 20;
  static constexpr std::size_t kSmallBuffer = 2 << 20;
  static constexpr std::size_t kLargeBuffer = 20 << 20;
  static constexpr std::size_t kMinLargeAlloc = 10 << 20;
  static constexpr std::size_t kRoundLarge = 2 << 20;

  explicit CachingAllocator(MemoryBackend& backend, CachingAllocatorConfig config = {});
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least `nbytes` for use on `stream`; throws OutOfMemoryError (PyTorch's
  /// message) when neither the cache nor the backend can serve it. 0 bytes gives nullptr.
  void* allocate(std::size_t nbytes, StreamId stream = 0);
  /// Returns a block to the cache (nullptr is ignored; an unknown pointer is an error).
  void free(void* ptr);
  /// Returns every wholly free cached segment to the backend.
  void empty_cache();

  MemoryStats stats() const;
  void reset_peak_stats();
  /// PyTorch's memory_summary() table, plus the fragmentation figure.
  std::string memory_summary() const;
  const CachingAllocatorConfig& config() const { return config_; }

  /// The rounded size a request of `nbytes` occupies.
  static std::size_t round_size(std::size_t nbytes);
  /// The size of segment requested from the backend for a rounded size.
  static std::size_t segment_size(std::size_t rounded);

 private:
  struct Block;
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, BlockOrder>;

  Block* find_free_block(Pool& pool, std::size_t size, StreamId stream);
  Block* new_segment(std::size_t size, StreamId stream, bool small);
  bool release_cached_segments();
  void release_segment(Block* block);
  Block* split(Block* block, std::size_t size);
  void merge_free_neighbours(Block* block);
  bool is_split(const Block* block) const;
  [[noreturn]] void out_of_memory(std::size_t nbytes, std::size_t rounded);
  void update_free_figures(MemoryStats& s) const;

  MemoryBackend& backend_;
  CachingAllocatorConfig config_;
  mutable std::mutex mutex_;
  Pool small_pool_, large_pool_;
  std::unordered_map<void*, Block*> live_;  // allocated blocks by address
  std::set<Block*> segments_;               // the first block of every segment
  MemoryStats stats_;
};

/// "20.00 MiB": sizes as PyTorch's messages print them.
std::string format_memory_size(std::int64_t bytes);

}  // namespace kiln
