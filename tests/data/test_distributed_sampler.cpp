// tests/data/test_distributed_sampler.cpp — DistributedSampler against torch's: padding by
// repeating the head, drop_last, every rank's share, shuffling from seed + epoch. Needs no MPI:
// the sampler is told its rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/test_util.h"

namespace kiln::data {
namespace {

using Indices = std::vector<std::size_t>;

TEST(DistributedSampler, PadsByRepeatingTheHeadAndTakesEveryNthLikeTorch) {
  // torch: list(DistributedSampler(range(10), num_replicas=3, rank=r, shuffle=False))
  const std::vector<Indices> torch{{0, 3, 6, 9}, {1, 4, 7, 0}, {2, 5, 8, 1}};
  for (std::size_t r = 0; r < 3; ++r) {
    const DistributedSampler s(10, 3, r, /*shuffle=*/false);
    EXPECT_EQ(s.num_samples(), 4u);
    EXPECT_EQ(s.indices(0), torch[r]) << r;
  }
  // More padding than samples: range(2) over 5 replicas repeats the head cyclically.
  for (std::size_t r = 0; r < 5; ++r) EXPECT_EQ(DistributedSampler(2, 5, r, false).indices(0), (Indices{r % 2}));
}

TEST(DistributedSampler, DropLastCutsToAMultipleOfTheReplicas) {
  const std::vector<Indices> torch{{0, 3, 6}, {1, 4, 7}, {2, 5, 8}};
  for (std::size_t r = 0; r < 3; ++r) {
    const DistributedSampler s(10, 3, r, false, 0, /*drop_last=*/true);
    EXPECT_EQ(s.num_samples(), 3u);
    EXPECT_EQ(s.indices(0), torch[r]);
  }
}

TEST(DistributedSampler, ShuffledSharesAreDisjointAndChangeWithTheEpoch) {
  for (std::int64_t epoch : {0, 1}) {
    std::multiset<std::size_t> seen;
    for (std::size_t r = 0; r < 4; ++r) {
      const Indices mine = DistributedSampler(100, 4, r, true, 42).indices(epoch);
      EXPECT_EQ(mine.size(), 25u);
      EXPECT_EQ(mine, DistributedSampler(100, 4, r, true, 42).indices(epoch));  // reproducible
      seen.insert(mine.begin(), mine.end());
    }
    EXPECT_EQ(seen.size(), 100u);
    EXPECT_EQ(std::set<std::size_t>(seen.begin(), seen.end()).size(), 100u);  // each exactly once
  }
  EXPECT_NE(DistributedSampler(100, 4, 0, true, 42).indices(0), DistributedSampler(100, 4, 0, true, 42).indices(1));
  EXPECT_NE(DistributedSampler(100, 4, 0, true, 42).indices(0), DistributedSampler(100, 4, 0, true, 7).indices(0));
}

TEST(DistributedSampler, ADataLoaderVisitsOnlyItsShare) {
  const DistributedSampler sampler(10, 3, 1, false);
  DataLoader loader(testing::numbers(10), {.batch_size = 3, .sampler = std::make_shared<DistributedSampler>(sampler)});
  EXPECT_EQ(loader.size(), 2u);  // 4 samples in batches of 3
  std::vector<double> visited;
  for (const Example& batch : loader) {
    for (double v : testing::values(batch.target)) visited.push_back(v);
  }
  EXPECT_EQ(visited, (std::vector<double>{1, 4, 7, 0}));
  EXPECT_THROW(DataLoader(testing::numbers(10), {.batch_size = 3, .shuffle = true,
                                                 .sampler = std::make_shared<DistributedSampler>(sampler)}),
               ValueError);
  EXPECT_THROW(DistributedSampler(10, 3, 3), ValueError);
}

}  // namespace
}  // namespace kiln::data
