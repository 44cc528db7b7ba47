// tests/core/test_allocator.cpp — the CPU allocator: 64-byte alignment, reuse of freed large
// blocks (no fresh pages in a steady-state loop), bounded cache, readable stats.
#include <cstdint>

#include "support/test_util.h"

using namespace kiln;

TEST(CpuAllocator, AlignsEveryAllocationTo64Bytes) {
  for (std::int64_t n : {1, 3, 17, 1000, 100000}) {
    Tensor t = empty({n});
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.raw_data_ptr()) % kCpuAlignment, 0u) << n;
  }
}

TEST(CpuAllocator, ReusesFreedLargeBlocks) {
  cpu_empty_cache();
  const auto before = cpu_allocator_stats();
  void* first = nullptr;
  {
    Tensor t = empty({1 << 20});  // 4 MiB: cached when freed
    first = t.raw_data_ptr();
  }
  const auto cached = cpu_allocator_stats();
  EXPECT_GE(cached.cached_bytes, 4 << 20);
  Tensor again = empty({1 << 20});
  EXPECT_EQ(again.raw_data_ptr(), first);  // the same block, already mapped and touched
  const auto after = cpu_allocator_stats();
  EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
  EXPECT_EQ(after.cache_misses, before.cache_misses + 1);
  // A steady-state loop: every allocation after the first is a cache hit.
  for (int i = 0; i < 10; ++i) Tensor step = ones({512, 256}) * 2;
  EXPECT_GE(cpu_allocator_stats().cache_hits, after.cache_hits + 10);
}

TEST(CpuAllocator, StatsTrackAllocatedAndPeak) {
  const auto base = cpu_allocator_stats();
  {
    Tensor a = empty({1 << 18});  // 1 MiB
    const auto during = cpu_allocator_stats();
    EXPECT_GE(during.allocated_bytes - base.allocated_bytes, 1 << 20);
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  }
  EXPECT_EQ(cpu_allocator_stats().allocated_bytes, base.allocated_bytes);
}

TEST(CpuAllocator, CacheIsBoundedAndCanBeEmptied) {
  const std::size_t old_limit = cpu_cache_limit();
  cpu_empty_cache();
  set_cpu_cache_limit(1 << 20);  // 1 MiB
  { Tensor big = empty({1 << 20}); }  // 4 MiB: too big to keep
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, 0);
  { Tensor small = empty({100000}); }  // ~400 KB: kept
  EXPECT_GT(cpu_allocator_stats().cached_bytes, 0);
  cpu_empty_cache();
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, 0);
  set_cpu_cache_limit(old_limit);
}

TEST(CpuAllocator, AFullCacheGivesBackTheBlocksFreedLongestAgo) {
  // A workload that changes sizes must not find the cache full of blocks nobody asks for:
  // the old sizes are evicted, the new ones are kept and reused.
  const std::size_t old_limit = cpu_cache_limit();
  cpu_empty_cache();
  set_cpu_cache_limit(3 << 20);  // 3 MiB
  { Tensor a = empty({1 << 18}), b = empty({1 << 18}); }  // two stale 1 MiB blocks
  EXPECT_EQ(cpu_allocator_stats().cached_bytes, 2 << 20);
  const auto before = cpu_allocator_stats();
  for (int step = 0; step < 5; ++step) {
    Tensor x = empty({3 << 17});  // 1.5 MiB: the new working set
  }
  const auto after = cpu_allocator_stats();
  EXPECT_EQ(after.cache_misses - before.cache_misses, 1) << "only the first 1.5 MiB request is fresh";
  EXPECT_EQ(after.cache_hits - before.cache_hits, 4);
  EXPECT_EQ(after.cache_evictions - before.cache_evictions, 1) << "one stale block made room";
  EXPECT_EQ(after.cached_bytes, (1 << 20) + (3 << 19));
  set_cpu_cache_limit(old_limit);
  cpu_empty_cache();
}
