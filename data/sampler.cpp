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

std::vector<std::size_t> RandomSampler::indices(std::int64_t epoch) const {
  std::vector<std::size_t> out(n_);
  std::iota(out.begin(), out.end(), std::size_t{0});
  std::seed_seq seq{static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32),
                    static_cast<std::uint32_t>(epoch)};
  std::mt19937_64 rng(seq);
  std::shuffle(out.begin(), out.end(), rng);
  return out;
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
