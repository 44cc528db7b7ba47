// data/dataloader.h — batches from a dataset: seeded shuffling, drop_last, worker threads
// with bounded prefetch and ordered output, pinned batches for asynchronous copies.
//
//   kiln::data::DataLoader loader(dataset, {.batch_size = 128, .shuffle = true, .num_workers = 2});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (const kiln::data::Example& batch : loader) train_step(batch.data, batch.target);
//
// Each `for` over the loader is one epoch (the shuffle changes with the epoch, reproducibly
// from the seed). See Note [DataLoader workers]. state_dict() records how far the loader has
// got, so a resumed run continues with the batch an uninterrupted one would have seen next.
// Read next: data/idx.h (Fashion-MNIST's files), examples/train_mlp.cpp.
#pragma once

#include <functional>
#include <iterator>
#include <memory>

#include "core/state_dict.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace kiln::data {

struct DataLoaderOptions {
  std::size_t batch_size = 1;
  bool shuffle = false;
  std::uint64_t seed = 0;
  /// Which samples, in which order (a DistributedSampler, say); replaces shuffle's
  /// RandomSampler and, like torch's, excludes shuffle.
  std::shared_ptr<const Sampler> sampler{};
  bool drop_last = false;
  /// 0 loads on the consumer's thread; otherwise this many worker threads.
  std::size_t num_workers = 0;
  /// Batches each worker may have loaded ahead of the consumer.
  std::size_t prefetch_factor = 2;
  /// Batches in page-locked memory, ready for to(cuda, non_blocking). Without CUDA this warns
  /// once and carries on with ordinary memory.
  bool pin_memory = false;
  /// Builds a batch from its examples; empty means Dataset::get_batch (which stacks them).
  std::function<Example(const std::vector<Example>&)> collate{};
};

/// What the last epoch looked like from the training loop's side.
struct DataLoaderStats {
  std::int64_t batches = 0;
  double consumer_wait_seconds = 0.0;  // time the loop spent waiting for a batch
  double mean_queue_depth = 0.0;       // batches already loaded when the loop asked
  std::size_t max_queue_depth = 0;
  bool pinned = false;                 // whether batches were in page-locked memory
};

class DataLoader {
  class Run;

 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options);

  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(std::shared_ptr<Run> run);
    const Example& operator*() const { return current_; }
    const Example* operator->() const { return &current_; }
    Iterator& operator++();
    bool operator==(const Iterator& other) const { return done() == other.done(); }

   private:
    bool done() const { return run_ == nullptr; }
    std::shared_ptr<Run> run_;
    Example current_;
  };

  /// Starts the next epoch.
  Iterator begin();
  Iterator end() { return {}; }
  /// Batches per epoch.
  std::size_t size() const;
  /// Statistics of the most recent epoch (updated as it runs).
  DataLoaderStats stats() const;
  std::int64_t epoch() const { return epoch_; }
  const DataLoaderOptions& options() const { return options_; }

  /// Where the loader stands: "epoch" (the one in progress, or the last one run) and
  /// "batches_yielded" in it (counting the batch the loop is working on), plus "seed",
  /// "shuffle" and "num_batches", which must match on load.
  StateDict state_dict() const;
  /// Makes the next begin() continue where `dict` stood: the rest of its epoch (the same
  /// batches, in the same order, whatever num_workers), or the next epoch when it was done.
  void load_state_dict(const StateDict& dict);

 private:
  struct Position {
    std::int64_t epoch = -1;
    std::size_t batches_yielded = 0;
  };

  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions options_;
  std::int64_t epoch_ = -1;
  std::size_t resume_at_batch_ = 0;  // where the next begin() starts its epoch
  std::shared_ptr<DataLoaderStats> stats_;
  std::shared_ptr<Position> position_;
};

}  // namespace kiln::data
