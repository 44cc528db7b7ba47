// data/sampler.h — the order samples are visited in, per epoch, and how they group into
// batches. Sampling happens on the consumer's thread before any worker runs, which is why a
// DataLoader gives the same batches for the same seed whatever its num_workers.
// Read next: data/dataloader.h.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The sample indices of epoch `epoch`, in visiting order.
  virtual std::vector<std::size_t> indices(std::int64_t epoch) const = 0;
  /// How many indices an epoch has.
  virtual std::size_t num_samples() const = 0;
};

/// 0, 1, ..., n - 1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(std::size_t n) : n_(n) {}
  std::vector<std::size_t> indices(std::int64_t epoch) const override;
  std::size_t num_samples() const override { return n_; }

 private:
  std::size_t n_;
};

/// A permutation of 0..n-1, different every epoch and reproducible from (seed, epoch).
class RandomSampler : public Sampler {
 public:
  RandomSampler(std::size_t n, std::uint64_t seed) : n_(n), seed_(seed) {}
  std::vector<std::size_t> indices(std::int64_t epoch) const override;
  std::size_t num_samples() const override { return n_; }

 private:
  std::size_t n_;
  std::uint64_t seed_;
};

/// The share of a dataset one of `num_replicas` processes visits (torch's DistributedSampler):
/// the indices (shuffled from seed + epoch if `shuffle`) are padded by repeating the first ones
/// to a multiple of num_replicas, or cut to one with `drop_last`, and rank r takes every
/// num_replicas-th from position r. Every rank sees as many samples, so all take the same
/// number of steps; an epoch's shares are disjoint apart from the padding.
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(std::size_t n, std::size_t num_replicas, std::size_t rank, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);
  std::vector<std::size_t> indices(std::int64_t epoch) const override;
  /// Samples this rank visits per epoch.
  std::size_t num_samples() const { return num_samples_; }

 private:
  std::size_t n_, num_replicas_, rank_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
  std::size_t num_samples_;
};

/// Groups a sampler's indices into batches of batch_size (the last one smaller unless
/// drop_last).
class BatchSampler {
 public:
  BatchSampler(const Sampler& sampler, std::size_t batch_size, bool drop_last);
  std::vector<std::vector<std::size_t>> batches(std::int64_t epoch) const;

 private:
  const Sampler& sampler_;
  std::size_t batch_size_;
  bool drop_last_;
};

}  // namespace kiln::data
