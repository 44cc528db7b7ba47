// core/fenced_block_cache.h — the caching behind pinned (page-locked) host memory, written
// once for any device: freed blocks are kept for reuse, but a block is only handed out again
// when every asynchronous copy queued from it has finished. On a GPU the fences are CUDA
// events (core/cuda/host_allocator.cpp); tests use fake fences.
//
// Why the fence: `x.to(cuda, /*non_blocking=*/true)` from pinned memory returns before the
// copy has run. If the tensor x is then freed and its block reused for the next batch, the
// DataLoader would overwrite bytes the GPU has not read yet: silent corruption. PyTorch's
// CachingHostAllocator records an event on the copy's stream for exactly this reason.
//
// Read next: core/cuda/host_allocator.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln {

/// Something that completes later: a CUDA event, or a test's fake.
class Fence {
 public:
  virtual ~Fence() = default;
  virtual bool done() const = 0;
  /// Blocks until done.
  virtual void wait() = 0;
};

/// Where blocks come from (cudaHostAlloc / cudaFreeHost on a GPU).
class HostBlockSource {
 public:
  virtual ~HostBlockSource() = default;
  virtual void* allocate(std::size_t nbytes) = 0;  // throws when out of memory
  virtual void free(void* ptr, std::size_t nbytes) = 0;
};

struct FencedCacheStats {
  std::int64_t allocations = 0;       // allocate() calls
  std::int64_t fresh_blocks = 0;      // blocks obtained from the source
  std::int64_t reused_blocks = 0;     // served from the cache
  std::int64_t blocks_in_use = 0;     // handed out, not yet freed
  std::int64_t blocks_in_flight = 0;  // freed, but a recorded copy may still be running
  std::int64_t cached_bytes = 0;      // freed blocks kept (including in flight)
};

class FencedBlockCache {
 public:
  explicit FencedBlockCache(HostBlockSource& source);
  /// Returns every block to the source, waiting first for the copies recorded on a freed
  /// block. A block still in use belongs to a tensor that outlives the cache: it is left
  /// allocated (freeing it would leave the tensor dangling), and a warning says how many.
  ~FencedBlockCache();
  FencedBlockCache(const FencedBlockCache&) = delete;
  FencedBlockCache& operator=(const FencedBlockCache&) = delete;

  /// A block of at least `nbytes` (rounded up to a power of two, as PyTorch's host allocator
  /// does, so similar batch sizes share blocks). 0 bytes gives nullptr.
  void* allocate(std::size_t nbytes);
  /// Returns a block; it is reused only once all fences recorded on it are done.
  void free(void* ptr);
  /// Notes an asynchronous use of the block containing `ptr` (any address inside it).
  /// Returns false when `ptr` is not in one of this cache's blocks.
  bool record_use(const void* ptr, std::shared_ptr<Fence> fence);
  /// True when `ptr` lies inside a block of this cache.
  bool owns(const void* ptr) const;
  /// Returns every free block whose fences are done to the source.
  void empty_cache();
  FencedCacheStats stats() const;

  static std::size_t round_size(std::size_t nbytes);

 private:
  struct Block {
    std::size_t size = 0;
    bool in_use = false;
    std::vector<std::shared_ptr<Fence>> fences;
  };
  bool fences_done(Block& block);
  std::map<char*, Block>::const_iterator find(const void* ptr) const;

  HostBlockSource& source_;
  mutable std::mutex mutex_;
  std::map<char*, Block> blocks_;  // every block, by start address
  FencedCacheStats stats_;
};

}  // namespace kiln
