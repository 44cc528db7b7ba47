// data/device_prefetcher.h — feeds a training loop batches that are already on the device:
// while the loop computes on batch i, batch i+1 is being copied. With a DataLoader that pins
// its batches (pin_memory = true) and the CUDA copier, the copy is a non_blocking transfer on
// a separate copy stream, fenced by events; the host never waits for it.
//
//   data::DataLoader loader(train, {.batch_size = 512, .num_workers = 2, .pin_memory = true});
//   data::DevicePrefetcher batches(loader, data::make_cuda_copier());
//   batches.start_epoch();
//   while (auto batch = batches.next()) step(batch->data, batch->target);
//
// See Note [Overlapping copies with compute].
// Read next: examples/pinned_pipeline.cpp, core/fenced_block_cache.h.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "data/dataloader.h"

namespace kiln::data {

// Note [Overlapping copies with compute]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Three rules make the overlap safe:
// 1. The source is page-locked. A non_blocking copy from pageable memory is staged through a
//    driver buffer and does not overlap (failure case non-blocking-pageable).
// 2. The consumer's stream waits for the copy's event before it reads the batch (on the
//    device: the host does not block). The copy of batch i+1 is queued *before* the compute
//    of batch i, so the two run at the same time on different streams.
// 3. Memory is not reused under a running copy: the pinned block is fenced by the copy's
//    event in the host allocator (FencedBlockCache); the device block is allocated on the
//    consumer's stream, and the copy stream first waits for the consumer's work queued so far,
//    so it never writes into memory an earlier kernel still reads.

/// One batch on its way: `batch` is on the device but must not be read before `make_ready()`
/// has ordered the consumer after the copy.
struct Transfer {
  Example batch;
  std::function<void()> make_ready;
};

/// How batches reach the device.
class BatchCopier {
 public:
  virtual ~BatchCopier() = default;
  /// Starts moving `host` to the device and returns at once when the copy is asynchronous.
  virtual Transfer start(const Example& host) = 0;
};

/// Plain `to(device)` copies: synchronous from pageable memory (and no copy at all when the
/// device is the CPU). The baseline the asynchronous copier is measured against.
std::shared_ptr<BatchCopier> make_sync_copier(Device device);
/// non_blocking copies on a dedicated copy stream of `device`, fenced by CUDA events.
/// Throws when CUDA is not available.
std::shared_ptr<BatchCopier> make_cuda_copier(Device device = Device("cuda"));

struct PrefetcherStats {
  std::int64_t batches = 0;
  double start_seconds = 0.0;  // host time spent starting copies (≈ 0 when they are asynchronous)
};

class DevicePrefetcher {
 public:
  DevicePrefetcher(DataLoader& loader, std::shared_ptr<BatchCopier> copier);
  ~DevicePrefetcher();
  DevicePrefetcher(const DevicePrefetcher&) = delete;
  DevicePrefetcher& operator=(const DevicePrefetcher&) = delete;
  /// Begins an epoch of the loader and starts the first copy.
  void start_epoch();
  /// The next batch, ready for the consumer's stream; nullopt when the epoch is over. Starts
  /// the copy of the batch after it before returning.
  std::optional<Example> next();
  const PrefetcherStats& stats() const { return stats_; }

 private:
  void start_next();
  void drop_pending();

  DataLoader& loader_;
  std::shared_ptr<BatchCopier> copier_;
  DataLoader::Iterator it_, end_;
  std::optional<Transfer> pending_;
  PrefetcherStats stats_;
};

}  // namespace kiln::data
