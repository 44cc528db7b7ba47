// tests/data/test_device_prefetcher.cpp — the pinned pipeline's loop without a GPU: batches
// arrive complete and in order under worker threads, and against a fake asynchronous copier
// (copies that run later, from staging blocks of a FencedBlockCache) no staging block is
// reused while a copy from it may still be in flight — the corruption a reused pinned buffer
// would cause shows up as wrong batch contents.
#include <cstring>
#include <deque>

#include "core/fenced_block_cache.h"
#include "support/fake_host_memory.h"
#include "support/test_util.h"

using namespace kiln;
using namespace kiln::data;
using kiln::testing::CountingSource;
using kiln::testing::FakeCopy;
using kiln::testing::numbers;
using kiln::testing::values;

namespace {

/// A "device" that runs copies only when told to: the host moves on after start(), as it
/// does after a non_blocking cudaMemcpyAsync. Each batch is staged into a block of the pool
/// (what pin_memory does), the block is freed at once (the staging tensor dies right after
/// the copy is queued), and the copy reads it later.
class FakeAsyncCopier final : public BatchCopier {
 public:
  explicit FakeAsyncCopier(FencedBlockCache& pool) : pool_(pool) {}

  Transfer start(const Example& host) override {
    const std::size_t nbytes = host.data.nbytes();
    void* staging = pool_.allocate(nbytes);
    std::memcpy(staging, host.data.contiguous().data_ptr<float>(), nbytes);
    max_in_flight_ = std::max(max_in_flight_, pool_.stats().blocks_in_flight);
    const Tensor device = empty(host.data.sizes(), kFloat32);
    auto fence = std::make_shared<FakeCopy>();
    EXPECT_TRUE(pool_.record_use(staging, fence));
    pool_.free(staging);
    queue_.push_back([device, staging, nbytes, fence] {
      std::memcpy(device.data_ptr<float>(), staging, nbytes);
      fence->finished = true;
    });
    return {Example{device, host.target}, [] {}};
  }
  /// Runs the oldest queued copy (the device making progress).
  void run_one() {
    if (queue_.empty()) return;
    queue_.front()();
    queue_.pop_front();
  }
  void synchronize() {
    while (!queue_.empty()) run_one();
  }
  std::int64_t max_in_flight() const { return max_in_flight_; }

 private:
  FencedBlockCache& pool_;
  std::deque<std::function<void()>> queue_;
  std::int64_t max_in_flight_ = 0;
};

}  // namespace

TEST(DevicePrefetcher, BatchesArriveCompleteAndInOrderUnderWorkers) {
  DataLoader loader(numbers(103), {.batch_size = 4, .num_workers = 3});
  DevicePrefetcher batches(loader, make_sync_copier(kCPU));
  for (int epoch = 0; epoch < 2; ++epoch) {
    batches.start_epoch();
    std::vector<double> seen;
    while (auto batch = batches.next()) {
      const std::vector<double> data = values(batch->data), target = values(batch->target);
      EXPECT_EQ(data, target) << "data and target of one example stay together";
      seen.insert(seen.end(), target.begin(), target.end());
    }
    ASSERT_EQ(seen.size(), 103u);
    for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<double>(i));
    EXPECT_EQ(batches.stats().batches, 26);
    EXPECT_FALSE(batches.next().has_value()) << "an epoch ends once";
  }
}

TEST(DevicePrefetcher, NoStagingBlockIsReusedWhileACopyFromItMayBeInFlight) {
  CountingSource source;
  FencedBlockCache pool(source);
  auto copier = std::make_shared<FakeAsyncCopier>(pool);
  DataLoader loader(numbers(64), {.batch_size = 8, .num_workers = 2});
  DevicePrefetcher batches(loader, copier);
  batches.start_epoch();
  std::vector<Example> received;
  int step = 0;
  while (auto batch = batches.next()) {
    received.push_back(*batch);
    // The device lags: it finishes a copy only every other step, so staging blocks are
    // requested while earlier copies are still pending.
    if (++step % 2 == 0) copier->run_one();
  }
  copier->synchronize();
  ASSERT_EQ(received.size(), 8u);
  for (std::size_t b = 0; b < received.size(); ++b) {
    for (std::size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(values(received[b].data)[i], static_cast<double>(b * 8 + i)) << "batch " << b << " element " << i;
    }
  }
  EXPECT_GE(copier->max_in_flight(), 2) << "the test must exercise blocks freed under a pending copy";
  const FencedCacheStats stats = pool.stats();
  EXPECT_GE(stats.fresh_blocks, 3) << "blocks in flight forced new ones";
  EXPECT_GE(stats.reused_blocks, 1) << "finished blocks were reused: a pool, not an allocation per batch";
}
