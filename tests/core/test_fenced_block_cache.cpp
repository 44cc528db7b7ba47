// tests/core/test_fenced_block_cache.cpp — the pinned-memory cache's rule, with fake fences
// standing in for CUDA events: a freed block is reused only after every asynchronous copy
// recorded on it has finished; until then a new block is made.
#include <gtest/gtest.h>

#include <set>

#include "core/fenced_block_cache.h"
#include "support/fake_host_memory.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using testing::CountingSource;
using testing::FakeCopy;

TEST(FencedBlockCache, RoundsToPowersOfTwoAndReusesFreedBlocks) {
  EXPECT_EQ(FencedBlockCache::round_size(1), 64u);
  EXPECT_EQ(FencedBlockCache::round_size(1000), 1024u);
  EXPECT_EQ(FencedBlockCache::round_size(1024), 1024u);
  CountingSource source;
  FencedBlockCache cache(source);
  void* a = cache.allocate(1000);
  cache.free(a);
  void* b = cache.allocate(900);  // same size class: the cached block
  EXPECT_EQ(b, a);
  EXPECT_EQ(source.allocations, 1);
  void* c = cache.allocate(5000);  // another class: a new block
  EXPECT_NE(c, a);
  const FencedCacheStats s = cache.stats();
  EXPECT_EQ(s.allocations, 3);
  EXPECT_EQ(s.reused_blocks, 1);
  EXPECT_EQ(s.blocks_in_use, 2);
  cache.free(b);
  cache.free(c);
  cache.empty_cache();
  EXPECT_EQ(source.frees, 2);
}

TEST(FencedBlockCache, ABlockIsNotReusedWhileACopyFromItMayRun) {
  CountingSource source;
  FencedBlockCache cache(source);
  char* staging = static_cast<char*>(cache.allocate(4096));
  auto copy = std::make_shared<FakeCopy>();
  // The copy reads from inside the block (a tensor view with an offset counts too).
  EXPECT_TRUE(cache.record_use(staging + 100, copy));
  cache.free(staging);  // the DataLoader drops the batch while the copy is queued
  EXPECT_EQ(cache.stats().blocks_in_flight, 1);
  void* next = cache.allocate(4096);
  EXPECT_NE(next, staging) << "reusing the block now would overwrite bytes the copy has not read";
  EXPECT_EQ(source.allocations, 2);
  copy->finished = true;
  EXPECT_EQ(cache.stats().blocks_in_flight, 0);
  EXPECT_EQ(cache.allocate(4096), staging);  // now it may be reused
  cache.empty_cache();  // in-use blocks stay
  EXPECT_EQ(source.frees, 0);
  cache.free(staging);
  cache.free(next);
}

TEST(FencedBlockCache, EveryRecordedCopyMustFinish) {
  CountingSource source;
  FencedBlockCache cache(source);
  void* block = cache.allocate(256);
  auto first = std::make_shared<FakeCopy>(), second = std::make_shared<FakeCopy>();
  cache.record_use(block, first);
  cache.record_use(block, second);
  cache.free(block);
  first->finished = true;
  void* other = cache.allocate(256);
  EXPECT_NE(other, block);
  second->finished = true;
  EXPECT_EQ(cache.allocate(256), block);
  cache.free(block);
  cache.free(other);
}

TEST(FencedBlockCache, DestroyingItWaitsForCopiesThenFreesEveryBlock) {
  CountingSource source;
  auto copy = std::make_shared<FakeCopy>();
  {
    FencedBlockCache cache(source);
    void* in_flight = cache.allocate(512);
    cache.record_use(in_flight, copy);
    cache.free(in_flight);
    cache.free(cache.allocate(4096));  // an idle cached block
  }
  EXPECT_EQ(copy->waits, 1);
  EXPECT_EQ(source.frees, 2);
}

TEST(FencedBlockCache, DestroyingItWithABlockInUseSaysSoAndLeavesTheBlockToItsHolder) {
  CountingSource source;
  std::vector<std::string> warnings;
  auto previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  void* held = nullptr;
  {
    FencedBlockCache cache(source);
    held = cache.allocate(1000);
  }
  set_warning_handler(previous);
  EXPECT_EQ(source.frees, 0);  // the tensor holding it could still read it
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("destroyed while 1 of its blocks (1024 bytes) were still in use"), std::string::npos);
  source.free(held, 1024);  // the holder's part, done by hand here
}

TEST(FencedBlockCache, ForeignPointersAndDoubleFreesAreErrors) {
  CountingSource source;
  FencedBlockCache cache(source);
  int on_stack = 0;
  EXPECT_FALSE(cache.record_use(&on_stack, std::make_shared<FakeCopy>()));
  EXPECT_FALSE(cache.owns(&on_stack));
  void* block = cache.allocate(64);
  EXPECT_TRUE(cache.owns(static_cast<char*>(block) + 63));
  EXPECT_FALSE(cache.owns(static_cast<char*>(block) + 64));
  cache.free(block);
  EXPECT_ERROR(cache.free(block), "was not allocated by this host allocator (or was freed twice)");
  EXPECT_EQ(cache.allocate(0), nullptr);
}

}  // namespace
}  // namespace kiln
