// core/caching_allocator.cpp — the algorithm of Note [Caching allocator]: pools of free
// blocks ordered by (stream, size, address) for best fit, splitting, merging, releasing
// whole free segments before giving up, and the statistics behind memory_summary().
// Read next: core/cuda/device_allocator.cpp (the same algorithm over cudaMalloc).
#include "core/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace kiln {

// ---------------------------------------------------------------------------------------
// Sizes and statistics

std::string format_memory_size(std::int64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%lld bytes", static_cast<long long>(bytes));
  } else if (bytes < (std::int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f KiB", b / 1024.0);
  } else if (bytes < (std::int64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return buf;
}

void Stat::increase(std::int64_t amount) {
  current += amount;
  allocated += amount;
  peak = std::max(peak, current);
}

void Stat::decrease(std::int64_t amount) {
  current -= amount;
  freed += amount;
}

double MemoryStats::fragmentation() const {
  if (cached_free_bytes <= 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free_block) / static_cast<double>(cached_free_bytes);
}

CachingAllocatorConfig CachingAllocatorConfig::parse(const std::string& text, const std::string& variable) {
  CachingAllocatorConfig config;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.find(':');
    KILN_CHECK_VALUE(colon != std::string::npos, variable, ": expected key:value pairs separated by commas, got '",
                     item, "'");
    const std::string key = item.substr(0, colon), value = item.substr(colon + 1);
    if (key == "max_split_size_mb") {
      char* end = nullptr;
      const long long mb = std::strtoll(value.c_str(), &end, 10);
      // PyTorch requires more than the 20 MiB large-segment size, so splitting still works.
      KILN_CHECK_VALUE(end != value.c_str() && *end == '\0' && mb > 20, variable,
                       ": max_split_size_mb must be an integer greater than 20, got '", value, "'");
      // PyTorch clamps, so that a value past what bytes can count means "no limit" (its
      // default) instead of a shift that wraps (2^44 MiB and more) to a small limit.
      constexpr unsigned long long kMostMiB = SIZE_MAX >> 20;
      config.max_split_size =
          static_cast<unsigned long long>(mb) >= kMostMiB ? SIZE_MAX : static_cast<std::size_t>(mb) << 20;
    } else {
      KILN_CHECK_VALUE(false, variable, ": unrecognized key '", key, "' (Kiln supports max_split_size_mb)");
    }
  }
  return config;
}

CachingAllocatorConfig CachingAllocatorConfig::from_environment() {
  const char* text = std::getenv("KILN_CUDA_ALLOC_CONF");
  return text == nullptr ? CachingAllocatorConfig{} : parse(text);
}

// ---------------------------------------------------------------------------------------
// BoundedHostArena

namespace {
constexpr std::size_t kArenaAlignment = 512;
std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }
}  // namespace

BoundedHostArena::BoundedHostArena(std::size_t capacity, std::string name)
    : capacity_(align_up(capacity, kArenaAlignment)),
      name_(std::move(name)),
      memory_(new std::byte[capacity_ + kArenaAlignment]) {
  if (capacity_ > 0) free_[0] = capacity_;
}

BoundedHostArena::~BoundedHostArena() = default;

void* BoundedHostArena::allocate_segment(std::size_t nbytes) {
  nbytes = align_up(std::max<std::size_t>(nbytes, 1), kArenaAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < nbytes) continue;
    const std::size_t offset = it->first, size = it->second;
    free_.erase(it);
    if (size > nbytes) free_[offset + nbytes] = size - nbytes;
    used_[offset] = nbytes;
    const auto base = align_up(reinterpret_cast<std::uintptr_t>(memory_.get()), kArenaAlignment);
    return reinterpret_cast<void*>(base + offset);
  }
  return nullptr;
}

void BoundedHostArena::free_segment(void* ptr, std::size_t) {
  const auto base = align_up(reinterpret_cast<std::uintptr_t>(memory_.get()), kArenaAlignment);
  const std::size_t offset = reinterpret_cast<std::uintptr_t>(ptr) - base;
  std::lock_guard<std::mutex> lock(mutex_);
  auto used = used_.find(offset);
  KILN_CHECK(used != used_.end(), "BoundedHostArena: freeing a segment it did not allocate");
  std::size_t start = offset, size = used->second;
  used_.erase(used);
  // Coalesce with the free ranges on either side.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

std::size_t BoundedHostArena::free_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::size_t total = 0;
  for (const auto& [offset, size] : free_) total += size;
  return total;
}

std::size_t BoundedHostArena::segments() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return used_.size();
}

// ---------------------------------------------------------------------------------------
// CachingAllocator

struct CachingAllocator::Block {
  std::size_t size = 0;       // bytes this block spans
  std::size_t requested = 0;  // what the caller asked for (while allocated)
  char* ptr = nullptr;
  StreamId stream = 0;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours within the segment
  Block* next = nullptr;
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

CachingAllocator::CachingAllocator(MemoryBackend& backend, CachingAllocatorConfig config)
    : backend_(backend), config_(config) {}

CachingAllocator::~CachingAllocator() {
  // Live blocks at destruction are the owner's bug; their segments are returned regardless,
  // so a test's arena is left clean.
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Block*> all;
  for (Pool* pool : {&small_pool_, &large_pool_}) all.insert(all.end(), pool->begin(), pool->end());
  for (auto& [ptr, block] : live_) all.push_back(block);
  std::vector<Block*> heads;
  for (Block* b : all) {
    while (b->prev != nullptr) b = b->prev;
    heads.push_back(b);
  }
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  for (Block* head : heads) {
    char* segment = head->ptr;
    std::size_t size = 0;
    for (Block* b = head; b != nullptr;) {
      size += b->size;
      Block* next = b->next;
      delete b;
      b = next;
    }
    backend_.free_segment(segment, size);
  }
}

std::size_t CachingAllocator::round_size(std::size_t nbytes) {
  if (nbytes < kMinBlockSize) return kMinBlockSize;
  return align_up(nbytes, kMinBlockSize);
}

std::size_t CachingAllocator::segment_size(std::size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return align_up(rounded, kRoundLarge);
}

bool CachingAllocator::is_split(const Block* block) const { return block->prev != nullptr || block->next != nullptr; }

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, std::size_t size, StreamId stream) {
  Block key;
  key.size = size;
  key.stream = stream;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  // A request below max_split_size never takes an unsplittable (oversize) block, and an
  // oversize request does not take a block much larger than itself: both would waste it.
  if (size < config_.max_split_size && block->size >= config_.max_split_size) return nullptr;
  if (size >= config_.max_split_size && block->size >= size + kLargeBuffer) return nullptr;
  pool.erase(it);
  if (is_split(block)) stats_.inactive_split_bytes.decrease(static_cast<std::int64_t>(block->size));
  return block;
}

CachingAllocator::Block* CachingAllocator::new_segment(std::size_t size, StreamId stream, bool small) {
  const std::size_t bytes = segment_size(size);
  void* ptr = backend_.allocate_segment(bytes);
  if (ptr == nullptr) return nullptr;
  auto* block = new Block;
  block->size = bytes;
  block->ptr = static_cast<char*>(ptr);
  block->stream = stream;
  block->small = small;
  const auto n = static_cast<std::int64_t>(bytes);
  stats_.reserved_bytes.increase(n);
  (small ? stats_.small_pool_reserved_bytes : stats_.large_pool_reserved_bytes).increase(n);
  stats_.segments.increase(1);
  if (bytes >= config_.max_split_size) stats_.oversize_segments.increase(1);
  return block;
}

void CachingAllocator::release_segment(Block* block) {
  const auto n = static_cast<std::int64_t>(block->size);
  backend_.free_segment(block->ptr, block->size);
  stats_.reserved_bytes.decrease(n);
  (block->small ? stats_.small_pool_reserved_bytes : stats_.large_pool_reserved_bytes).decrease(n);
  stats_.segments.decrease(1);
  if (block->size >= config_.max_split_size) stats_.oversize_segments.decrease(1);
  delete block;
}

bool CachingAllocator::release_cached_segments() {
  bool released = false;
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      if (is_split(block)) {
        ++it;
        continue;
      }
      it = pool->erase(it);
      release_segment(block);
      released = true;
    }
  }
  return released;
}

CachingAllocator::Block* CachingAllocator::split(Block* block, std::size_t size) {
  auto* rest = new Block;
  rest->size = block->size - size;
  rest->ptr = block->ptr + size;
  rest->stream = block->stream;
  rest->small = block->small;
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  (rest->small ? small_pool_ : large_pool_).insert(rest);
  stats_.inactive_split_bytes.increase(static_cast<std::int64_t>(rest->size));
  return rest;
}

void CachingAllocator::merge_free_neighbours(Block* block) {
  Pool& pool = block->small ? small_pool_ : large_pool_;
  for (Block* neighbour : {block->prev, block->next}) {
    if (neighbour == nullptr || neighbour->allocated) continue;
    pool.erase(neighbour);
    stats_.inactive_split_bytes.decrease(static_cast<std::int64_t>(neighbour->size));
    if (neighbour == block->prev) {
      block->ptr = neighbour->ptr;
      block->prev = neighbour->prev;
      if (block->prev != nullptr) block->prev->next = block;
    } else {
      block->next = neighbour->next;
      if (block->next != nullptr) block->next->prev = block;
    }
    block->size += neighbour->size;
    delete neighbour;
  }
  pool.insert(block);
  if (is_split(block)) stats_.inactive_split_bytes.increase(static_cast<std::int64_t>(block->size));
}

void* CachingAllocator::allocate(std::size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t size = round_size(nbytes);
  const bool small = size <= kSmallSize;
  Pool& pool = small ? small_pool_ : large_pool_;
  Block* block = find_free_block(pool, size, stream);
  if (block == nullptr) block = new_segment(size, stream, small);
  if (block == nullptr && release_cached_segments()) {
    ++stats_.num_alloc_retries;
    block = new_segment(size, stream, small);
  }
  if (block == nullptr) out_of_memory(nbytes, size);

  const std::size_t remaining = block->size - size;
  const bool should_split = small ? remaining >= kMinBlockSize
                                  : size < config_.max_split_size && remaining > kSmallSize;
  if (should_split) split(block, size);
  block->allocated = true;
  block->requested = nbytes;
  live_[block->ptr] = block;

  const auto n = static_cast<std::int64_t>(block->size);
  stats_.allocated_bytes.increase(n);
  stats_.active_bytes.increase(n);
  stats_.requested_bytes.increase(static_cast<std::int64_t>(nbytes));
  (small ? stats_.small_pool_allocated_bytes : stats_.large_pool_allocated_bytes).increase(n);
  stats_.allocations.increase(1);
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.increase(1);
  return block->ptr;
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  KILN_CHECK(it != live_.end(), "invalid device pointer: ", ptr, " was not allocated by this caching allocator");
  Block* block = it->second;
  live_.erase(it);
  const auto n = static_cast<std::int64_t>(block->size);
  stats_.allocated_bytes.decrease(n);
  stats_.active_bytes.decrease(n);
  stats_.requested_bytes.decrease(static_cast<std::int64_t>(block->requested));
  (block->small ? stats_.small_pool_allocated_bytes : stats_.large_pool_allocated_bytes).decrease(n);
  stats_.allocations.decrease(1);
  if (block->size >= config_.max_split_size) stats_.oversize_allocations.decrease(1);
  block->allocated = false;
  block->requested = 0;
  merge_free_neighbours(block);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_segments();
}

void CachingAllocator::update_free_figures(MemoryStats& s) const {
  s.largest_free_block = 0;
  s.cached_free_bytes = 0;
  for (const Pool* pool : {&small_pool_, &large_pool_}) {
    for (const Block* b : *pool) {
      s.largest_free_block = std::max(s.largest_free_block, static_cast<std::int64_t>(b->size));
      s.cached_free_bytes += static_cast<std::int64_t>(b->size);
    }
  }
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats s = stats_;
  update_free_figures(s);
  return s;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Stat* st : {&stats_.allocated_bytes, &stats_.requested_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                   &stats_.inactive_split_bytes, &stats_.allocations, &stats_.segments, &stats_.oversize_allocations,
                   &stats_.oversize_segments, &stats_.small_pool_allocated_bytes, &stats_.large_pool_allocated_bytes,
                   &stats_.small_pool_reserved_bytes, &stats_.large_pool_reserved_bytes}) {
    st->reset_peak();
  }
}

void CachingAllocator::out_of_memory(std::size_t nbytes, std::size_t rounded) {
  ++stats_.num_ooms;
  MemoryStats s = stats_;
  update_free_figures(s);
  const std::int64_t allocated = s.allocated_bytes.current;
  const std::int64_t unallocated = s.reserved_bytes.current - allocated;
  std::ostringstream os;
  os << backend_.kind() << " out of memory. Tried to allocate " << format_memory_size(static_cast<std::int64_t>(nbytes))
     << ". " << backend_.name() << " has a total capacity of "
     << format_memory_size(static_cast<std::int64_t>(backend_.total_bytes())) << " of which "
     << format_memory_size(static_cast<std::int64_t>(backend_.free_bytes())) << " is free. Of the allocated memory "
     << format_memory_size(allocated) << " is allocated by Kiln, and " << format_memory_size(unallocated)
     << " is reserved by Kiln but unallocated";
  if (unallocated > 0) {
    char frag[32];
    std::snprintf(frag, sizeof frag, "%.0f%%", 100.0 * s.fragmentation());
    os << " (largest free block " << format_memory_size(s.largest_free_block) << ", fragmentation " << frag
       << "; this request needs " << format_memory_size(static_cast<std::int64_t>(rounded)) << " in one piece)";
  }
  os << ". If reserved but unallocated memory is large, reuse buffers (copy_/fill_ into an existing tensor) "
        "instead of creating new ones in a loop, or set KILN_CUDA_ALLOC_CONF=max_split_size_mb:<N> to avoid "
        "fragmentation; empty_cache() returns cached segments. memory_summary() shows the pools.";
  detail::throw_error<OutOfMemoryError>(std::source_location::current(), os.str());
}

std::string CachingAllocator::memory_summary() const {
  const MemoryStats s = stats();
  constexpr int kWidth = 75;
  std::ostringstream os;
  auto rule = [&](char c) { os << '|' << std::string(kWidth, c) << "|\n"; };
  auto centred = [&](const std::string& text) {
    const int pad = std::max(0, kWidth - static_cast<int>(text.size()));
    os << '|' << std::string(static_cast<std::size_t>(pad / 2), ' ') << text
       << std::string(static_cast<std::size_t>(pad - pad / 2), ' ') << "|\n";
  };
  auto cell = [](const std::string& text, int width) {
    const int pad = std::max(0, width - static_cast<int>(text.size()));
    return std::string(static_cast<std::size_t>(pad), ' ') + text;
  };
  auto row = [&](const std::string& name, const Stat& st, bool bytes) {
    auto fmt = [&](std::int64_t v) { return bytes ? format_memory_size(v) : std::to_string(v); };
    std::string label = name;
    label.resize(22, ' ');
    os << "| " << label << "|" << cell(fmt(st.current), 11) << " |" << cell(fmt(st.peak), 11) << " |"
       << cell(fmt(st.allocated), 11) << " |" << cell(fmt(st.freed), 11) << " |\n";
  };
  auto row_by_pool = [&](const std::string& name, const Stat& total, const Stat& large, const Stat& small) {
    row(name, total, true);
    row("      from large pool", large, true);
    row("      from small pool", small, true);
  };
  rule('=');
  centred("Kiln " + backend_.kind() + " memory summary, " + backend_.name());
  rule('-');
  {
    std::string left = backend_.kind() + " OOMs: " + std::to_string(s.num_ooms);
    std::string right = "allocation retries: " + std::to_string(s.num_alloc_retries);
    const int half = kWidth / 2;
    os << '|' << cell(left, half - 2) << "  |" << cell(right, kWidth - half - 3) << "  |\n";
  }
  rule('=');
  os << "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n";
  rule('-');
  row_by_pool("Allocated memory", s.allocated_bytes, s.large_pool_allocated_bytes, s.small_pool_allocated_bytes);
  rule('-');
  row("Active memory", s.active_bytes, true);
  row("Requested memory", s.requested_bytes, true);
  rule('-');
  row_by_pool("GPU reserved memory", s.reserved_bytes, s.large_pool_reserved_bytes, s.small_pool_reserved_bytes);
  rule('-');
  row("Non-releasable memory", s.inactive_split_bytes, true);
  rule('-');
  row("Allocations", s.allocations, false);
  row("GPU reserved segments", s.segments, false);
  row("Oversize allocations", s.oversize_allocations, false);
  row("Oversize GPU segments", s.oversize_segments, false);
  rule('=');
  {
    char frag[48];
    std::snprintf(frag, sizeof frag, "fragmentation %.0f%%", 100.0 * s.fragmentation());
    centred("Largest free block " + format_memory_size(s.largest_free_block) + " of " +
            format_memory_size(s.cached_free_bytes) + " cached free (" + frag + ")");
  }
  rule('=');
  return os.str();
}

}  // namespace kiln
