// core/fenced_block_cache.cpp — see core/fenced_block_cache.h.
#include "core/fenced_block_cache.h"

#include <algorithm>
#include <bit>

#include "core/error.h"
#include "core/warning.h"

namespace kiln {

FencedBlockCache::FencedBlockCache(HostBlockSource& source) : source_(source) {}

FencedBlockCache::~FencedBlockCache() {
  std::size_t held = 0, held_bytes = 0;
  for (auto& [ptr, block] : blocks_) {
    if (block.in_use) {
      ++held;
      held_bytes += block.size;
      continue;
    }
    // Freeing a block under a running copy would hand its bytes to the next owner while the
    // device still reads them: wait for the copy first.
    for (const std::shared_ptr<Fence>& fence : block.fences) fence->wait();
    source_.free(ptr, block.size);
  }
  if (held > 0) {
    warn("a pinned-memory cache was destroyed while " + std::to_string(held) + " of its blocks (" +
         std::to_string(held_bytes) + " bytes) were still in use: they stay allocated for the tensors that hold them");
  }
}

std::size_t FencedBlockCache::round_size(std::size_t nbytes) { return std::bit_ceil(std::max<std::size_t>(nbytes, 64)); }

bool FencedBlockCache::fences_done(Block& block) {
  std::erase_if(block.fences, [](const std::shared_ptr<Fence>& f) { return f->done(); });
  return block.fences.empty();
}

void* FencedBlockCache::allocate(std::size_t nbytes) {
  if (nbytes == 0) return nullptr;
  const std::size_t size = round_size(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  for (auto& [ptr, block] : blocks_) {
    if (block.in_use || block.size != size || !fences_done(block)) continue;
    block.in_use = true;
    ++stats_.reused_blocks;
    ++stats_.blocks_in_use;
    stats_.cached_bytes -= static_cast<std::int64_t>(size);
    return ptr;
  }
  char* ptr = static_cast<char*>(source_.allocate(size));
  blocks_[ptr] = Block{size, true, {}};
  ++stats_.fresh_blocks;
  ++stats_.blocks_in_use;
  return ptr;
}

std::map<char*, FencedBlockCache::Block>::const_iterator FencedBlockCache::find(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  auto it = blocks_.upper_bound(const_cast<char*>(p));
  if (it == blocks_.begin()) return blocks_.end();
  --it;
  return p < it->first + it->second.size ? it : blocks_.end();
}

void FencedBlockCache::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(static_cast<char*>(ptr));
  KILN_CHECK(it != blocks_.end() && it->second.in_use, "pinned memory block ", ptr,
             " was not allocated by this host allocator (or was freed twice)");
  it->second.in_use = false;
  --stats_.blocks_in_use;
  stats_.cached_bytes += static_cast<std::int64_t>(it->second.size);
}

bool FencedBlockCache::record_use(const void* ptr, std::shared_ptr<Fence> fence) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = find(ptr);
  if (it == blocks_.end()) return false;
  blocks_[it->first].fences.push_back(std::move(fence));
  return true;
}

bool FencedBlockCache::owns(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return find(ptr) != blocks_.end();
}

void FencedBlockCache::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (!it->second.in_use && fences_done(it->second)) {
      source_.free(it->first, it->second.size);
      stats_.cached_bytes -= static_cast<std::int64_t>(it->second.size);
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
}

FencedCacheStats FencedBlockCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  FencedCacheStats s = stats_;
  s.blocks_in_flight = 0;
  for (const auto& [ptr, block] : blocks_) {
    if (block.in_use) continue;
    const bool pending = std::any_of(block.fences.begin(), block.fences.end(),
                                     [](const std::shared_ptr<Fence>& f) { return !f->done(); });
    if (pending) ++s.blocks_in_flight;
  }
  return s;
}

}  // namespace kiln
