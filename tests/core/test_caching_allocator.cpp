// tests/core/test_caching_allocator.cpp — Note [Caching allocator]'s algorithm on a bounded
// host arena (no GPU needed): rounding, pools, best fit, splitting and merging, per-stream
// reuse, release-and-retry, the out-of-memory message, max_split_size, statistics, and the
// fragmentation failure from the reference articles with its fix.
#include <gtest/gtest.h>

#include <vector>

#include "core/caching_allocator.h"
#include "kiln.h"
#include "support/test_util.h"

namespace kiln {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t KiB = std::size_t{1} << 10;

TEST(CachingAllocator, RoundsSizesAndPicksSegmentSizesLikePyTorch) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::segment_size(512), 2 * MiB);           // small pool
  EXPECT_EQ(CachingAllocator::segment_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(1 * MiB + 512), 20 * MiB);  // large pool
  EXPECT_EQ(CachingAllocator::segment_size(9 * MiB), 20 * MiB);
  EXPECT_EQ(CachingAllocator::segment_size(10 * MiB), 10 * MiB);       // own segment, 2 MiB multiple
  EXPECT_EQ(CachingAllocator::segment_size(11 * MiB), 12 * MiB);
}

TEST(CachingAllocator, SmallRequestsShareOneSegmentAndFreedBlocksAreCached) {
  BoundedHostArena arena(64 * MiB);
  CachingAllocator cache(arena);
  void* a = cache.allocate(1000);
  void* b = cache.allocate(100 * KiB);
  EXPECT_EQ(arena.segments(), 1u);  // both from one 2 MiB small segment
  MemoryStats s = cache.stats();
  EXPECT_EQ(s.allocated_bytes.current, static_cast<std::int64_t>(1024 + 100 * KiB));
  EXPECT_EQ(s.requested_bytes.current, static_cast<std::int64_t>(1000 + 100 * KiB));
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(2 * MiB));
  EXPECT_EQ(s.allocations.current, 2);
  cache.free(a);
  cache.free(b);
  s = cache.stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(2 * MiB));  // cached, not returned
  EXPECT_EQ(s.allocated_bytes.peak, static_cast<std::int64_t>(1024 + 100 * KiB));
  EXPECT_EQ(arena.segments(), 1u);
  // The same request again reuses the cached memory: no new segment.
  void* c = cache.allocate(1000);
  EXPECT_EQ(c, a);
  cache.free(c);
  cache.empty_cache();
  EXPECT_EQ(arena.segments(), 0u);
  EXPECT_EQ(cache.stats().reserved_bytes.current, 0);
  EXPECT_EQ(arena.free_bytes(), arena.total_bytes());
}

TEST(CachingAllocator, SplitsAndMergesFreeNeighbours) {
  BoundedHostArena arena(64 * MiB);
  CachingAllocator cache(arena);
  // Three 4 MiB blocks carved from one 20 MiB large segment.
  char* a = static_cast<char*>(cache.allocate(4 * MiB));
  char* b = static_cast<char*>(cache.allocate(4 * MiB));
  char* c = static_cast<char*>(cache.allocate(4 * MiB));
  EXPECT_EQ(arena.segments(), 1u);
  EXPECT_EQ(b, a + 4 * MiB);
  EXPECT_EQ(c, b + 4 * MiB);
  // The 8 MiB tail is free inside a segment that is in use: non-releasable.
  EXPECT_EQ(cache.stats().inactive_split_bytes.current, static_cast<std::int64_t>(8 * MiB));
  cache.free(b);  // a hole between two live blocks
  EXPECT_EQ(cache.stats().inactive_split_bytes.current, static_cast<std::int64_t>(12 * MiB));
  cache.free(a);  // merges with b's hole
  MemoryStats s = cache.stats();
  EXPECT_EQ(s.largest_free_block, static_cast<std::int64_t>(8 * MiB));
  cache.empty_cache();  // c keeps the segment alive
  EXPECT_EQ(arena.segments(), 1u);
  cache.free(c);  // everything merges back into one 20 MiB block
  s = cache.stats();
  EXPECT_EQ(s.largest_free_block, static_cast<std::int64_t>(20 * MiB));
  EXPECT_EQ(s.inactive_split_bytes.current, 0);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 0.0);
  cache.empty_cache();
  EXPECT_EQ(arena.segments(), 0u);
}

TEST(CachingAllocator, BestFitTakesTheSmallestBlockThatFits) {
  BoundedHostArena arena(128 * MiB);
  CachingAllocator cache(arena);
  // Two separate segments (>= 10 MiB requests get their own), freed: 12 MiB and 16 MiB.
  void* big = cache.allocate(16 * MiB);
  void* mid = cache.allocate(12 * MiB);
  cache.free(big);
  cache.free(mid);
  EXPECT_EQ(cache.allocate(11 * MiB), mid);
}

TEST(CachingAllocator, BlocksAreReusedOnlyOnTheStreamThatFreedThem) {
  BoundedHostArena arena(64 * MiB);
  CachingAllocator cache(arena);
  void* on_one = cache.allocate(4 * MiB, /*stream=*/1);
  cache.free(on_one);
  void* on_two = cache.allocate(4 * MiB, /*stream=*/2);
  EXPECT_EQ(arena.segments(), 2u);  // stream 2 could not take stream 1's cached block
  EXPECT_NE(on_two, on_one);
  EXPECT_EQ(cache.allocate(4 * MiB, 1), on_one);
}

TEST(CachingAllocator, ReleasesCachedSegmentsAndRetriesBeforeRunningOut) {
  BoundedHostArena arena(40 * MiB);
  CachingAllocator cache(arena);
  void* small = cache.allocate(512 * KiB);  // a 2 MiB small segment
  void* large = cache.allocate(15 * MiB);   // its own 16 MiB segment
  cache.free(large);                         // cached, still reserved
  // 24 MiB does not fit in the 22 MiB the arena has left, so the cache gives the wholly free
  // 16 MiB segment back and retries.
  void* huge = cache.allocate(24 * MiB);
  const MemoryStats s = cache.stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(26 * MiB));
  cache.free(huge);
  cache.free(small);
}

TEST(CachingAllocator, OutOfMemoryNamesWhatIsAllocatedAndWhatIsOnlyReserved) {
  BoundedHostArena arena(16 * MiB, "GPU 0");
  CachingAllocator cache(arena);
  void* a = cache.allocate(10 * MiB);
  try {
    cache.allocate(20 * MiB);
    FAIL() << "expected an out-of-memory error";
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.message();
    EXPECT_NE(m.find("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 16.00 MiB of "
                     "which 6.00 MiB is free. Of the allocated memory 10.00 MiB is allocated by Kiln, and 0 bytes is "
                     "reserved by Kiln but unallocated."),
              std::string::npos)
        << m;
  }
  EXPECT_EQ(cache.stats().num_ooms, 1);
  cache.free(a);
}

TEST(CachingAllocator, MaxSplitSizeKeepsBigBlocksWhole) {
  EXPECT_EQ(CachingAllocatorConfig::parse("max_split_size_mb:64").max_split_size, 64 * MiB);
  // Past what bytes can count it is no limit (PyTorch clamps), not a shift that wraps: 2^44 MiB
  // used to become 0 bytes, and every large block counted as oversize.
  EXPECT_EQ(CachingAllocatorConfig::parse("max_split_size_mb:17592186044416").max_split_size, SIZE_MAX);
  EXPECT_EQ(CachingAllocatorConfig::parse("max_split_size_mb:99999999999999999999").max_split_size, SIZE_MAX);
  EXPECT_ERROR(CachingAllocatorConfig::parse("max_split_size_mb:abc"), "max_split_size_mb must be an integer");
  EXPECT_ERROR(CachingAllocatorConfig::parse("max_split_size_mb:8"), "greater than 20");
  EXPECT_ERROR(CachingAllocatorConfig::parse("garbage_collection:1"), "unrecognized key 'garbage_collection'");
  EXPECT_ERROR(CachingAllocatorConfig::parse("max_split_size_mb"), "key:value");

  BoundedHostArena arena(256 * MiB);
  CachingAllocatorConfig config;
  config.max_split_size = 32 * MiB;
  CachingAllocator cache(arena, config);
  void* big = cache.allocate(40 * MiB);  // oversize: its own 40 MiB segment
  cache.free(big);
  // A small large-pool request must not nibble the cached 40 MiB block: it gets a new segment.
  void* medium = cache.allocate(4 * MiB);
  EXPECT_NE(medium, big);
  EXPECT_EQ(arena.segments(), 2u);
  // An oversize request may reuse it, whole.
  void* again = cache.allocate(39 * MiB);
  EXPECT_EQ(again, big);
  const MemoryStats s = cache.stats();
  EXPECT_EQ(s.oversize_allocations.current, 1);
  EXPECT_EQ(s.oversize_segments.current, 1);
  cache.free(again);
  cache.free(medium);
}

/// A Float32 tensor of `numel` elements living in the cache's arena.
Tensor arena_tensor(CachingAllocator& cache, std::int64_t numel) {
  auto* p = static_cast<float*>(cache.allocate(static_cast<std::size_t>(numel) * sizeof(float)));
  return from_blob(p, {numel}, [&cache](void* q) { cache.free(q); });
}

// The reference articles' failure: tensors created in a loop, some kept and some dropped,
// leave holes in every segment. Memory is reserved but in pieces too small for the next large
// tensor, and nothing can be returned because every segment holds a live tensor.
TEST(CachingAllocator, TensorsCreatedInALoopFragmentTheCacheUntilOutOfMemory) {
  BoundedHostArena arena(64 * MiB, "GPU 0");
  CachingAllocator cache(arena);
  const std::int64_t chunk = static_cast<std::int64_t>(3 * MiB / 2 / sizeof(float));  // 1.5 MiB
  std::vector<Tensor> kept;
  for (int i = 0; i < 36; ++i) {
    Tensor scratch = arena_tensor(cache, chunk);  // a fresh temporary every iteration ...
    scratch.fill_(static_cast<double>(i));
    Tensor result = arena_tensor(cache, chunk);   // ... and a result that is kept
    result.copy_(scratch);
    kept.push_back(result);
  }
  MemoryStats s = cache.stats();
  // 36 results of 1.5 MiB in three 20 MiB segments; the last result in each of the first two
  // segments took the whole 2 MiB tail (a 0.5 MiB remainder is too small to split off).
  EXPECT_EQ(s.allocated_bytes.current, static_cast<std::int64_t>(55 * MiB));
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(60 * MiB));
  for (std::size_t i = 0; i < kept.size(); i += 2) kept[i] = Tensor();  // drop half the results
  s = cache.stats();
  EXPECT_EQ(s.allocated_bytes.current, static_cast<std::int64_t>(55 * MiB / 2));
  EXPECT_GT(s.fragmentation(), 0.8);  // 32.5 MiB free, but in pieces of 0.5 to 3.5 MiB
  try {
    arena_tensor(cache, static_cast<std::int64_t>(8 * MiB / sizeof(float)));
    FAIL() << "expected the fragmented cache to run out of memory";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(e.message().find("32.50 MiB is reserved by Kiln but unallocated"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("fragmentation"), std::string::npos);
  }
  EXPECT_NE(cache.memory_summary().find("Largest free block 3.50 MiB of 32.50 MiB cached free"), std::string::npos)
      << cache.memory_summary();
}

TEST(CachingAllocator, ReusingOneBufferAvoidsTheFragmentation) {
  BoundedHostArena arena(64 * MiB, "GPU 0");
  CachingAllocator cache(arena);
  const std::int64_t chunk = static_cast<std::int64_t>(3 * MiB / 2 / sizeof(float));
  Tensor scratch = arena_tensor(cache, chunk);  // created once, refilled every iteration
  std::vector<Tensor> kept;
  for (int i = 0; i < 36; ++i) {
    scratch.fill_(static_cast<double>(i));
    if (i % 2 == 1) {
      Tensor result = arena_tensor(cache, chunk);
      result.copy_(scratch);
      kept.push_back(result);
    }
  }
  EXPECT_EQ(kept.back()[0].item<float>(), 35.0f);
  Tensor large = arena_tensor(cache, static_cast<std::int64_t>(8 * MiB / sizeof(float)));
  EXPECT_EQ(large.numel() * 4, static_cast<std::int64_t>(8 * MiB));
  EXPECT_EQ(cache.stats().num_ooms, 0);
}

TEST(CachingAllocator, SummaryIsAPyTorchStyleTable) {
  BoundedHostArena arena(64 * MiB, "GPU 0");
  CachingAllocator cache(arena);
  void* p = cache.allocate(3 * MiB);
  const std::string summary = cache.memory_summary();
  for (const char* line : {"Kiln CUDA memory summary, GPU 0", "Metric         | Cur Usage  | Peak Usage",
                           "| Allocated memory      |   3.00 MiB |", "| GPU reserved memory   |  20.00 MiB |",
                           "| Non-releasable memory |  17.00 MiB |", "| Allocations           |          1 |"}) {
    EXPECT_NE(summary.find(line), std::string::npos) << line << "\n" << summary;
  }
  cache.free(p);
  cache.reset_peak_stats();
  EXPECT_EQ(cache.stats().allocated_bytes.peak, 0);
  EXPECT_ERROR(cache.free(reinterpret_cast<void*>(0x1234)), "was not allocated by this caching allocator");
}

}  // namespace
}  // namespace kiln
