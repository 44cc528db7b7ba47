// data/sampler.cpp — samplers.
#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"

namespace kiln::data {

std::vector<std::size_t> SequentialSampler::indices(std::int64_t) const {
  std::vector<std::size_t> out(n_);
  std::iota(out.begin(), out.end(), std::size_t{0});
  return out;
}

namespace {

/// 0..n-1 in an order that depends only on (seed, epoch).
std::vector<std::size_t> permutation(std::size_t n, std::uint64_t seed, std::int64_t epoch) {
  std::vector<std::size_t> out(n);
  std::iota(out.begin(), out.end(), std::size_t{0});
  std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(epoch)};
  std::mt19937_64 rng(seq);
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

}  // namespace

std::vector<std::size_t> RandomSampler::indices(std::int64_t epoch) const { return permutation(n_, seed_, epoch); }

DistributedSampler::DistributedSampler(std::size_t n, std::size_t num_replicas, std::size_t rank, bool shuffle,
                                       std::uint64_t seed, bool drop_last)
    : n_(n), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed), drop_last_(drop_last) {
  KILN_CHECK_VALUE(num_replicas > 0, "DistributedSampler: num_replicas must be positive, got ", num_replicas);
  KILN_CHECK_VALUE(rank < num_replicas, "Invalid rank ", rank, ", rank should be in the interval [0, ",
                   num_replicas - 1, "]");
  num_samples_ = drop_last && n % num_replicas != 0 ? n / num_replicas  // == ceil((n - r) / r)
                                                    : (n + num_replicas - 1) / num_replicas;
}

std::vector<std::size_t> DistributedSampler::indices(std::int64_t epoch) const {
  std::vector<std::size_t> all;
  if (shuffle_) {
    // seed + epoch, as torch's; the same on every rank, so the shares are disjoint.
    all = permutation(n_, seed_ + static_cast<std::uint64_t>(epoch), 0);
  } else {
    all.resize(n_);
    std::iota(all.begin(), all.end(), std::size_t{0});
  }
  const std::size_t total = num_samples_ * num_replicas_;
  if (all.size() < total && !all.empty()) {
    for (std::size_t i = 0; all.size() < total; ++i) all.push_back(all[i]);  // repeats the head, cyclically
  }
  all.resize(std::min(all.size(), total));
  std::vector<std::size_t> mine;
  mine.reserve(num_samples_);
  for (std::size_t i = rank_; i < all.size(); i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

BatchSampler::BatchSampler(const Sampler& sampler, std::size_t batch_size, bool drop_last)
    : sampler_(sampler), batch_size_(batch_size), drop_last_(drop_last) {
  KILN_CHECK_VALUE(batch_size > 0, "batch_size should be a positive integer value, but got batch_size=", batch_size);
}

std::vector<std::vector<std::size_t>> BatchSampler::batches(std::int64_t epoch) const {
  const std::vector<std::size_t> order = sampler_.indices(epoch);
  std::vector<std::vector<std::size_t>> out;
  for (std::size_t start = 0; start < order.size(); start += batch_size_) {
    const std::size_t end = std::min(order.size(), start + batch_size_);
    if (drop_last_ && end - start < batch_size_) break;
    out.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(start), order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

}  // namespace kiln::data
