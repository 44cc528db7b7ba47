// data/dataset.h — datasets: something with a size that returns example i on request.
// Datasets must be safe to read from several DataLoader workers at once (get() is const).
//
//   auto ds = std::make_shared<kiln::data::TensorDataset>(images, labels);
//   auto [train, val] = kiln::data::random_split(ds, {50000, 10000}, /*seed=*/0);
//
// Read next: data/dataloader.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace kiln::data {

/// One sample (or, after collation, one batch): an input and its target.
struct Example {
  Tensor data;
  Tensor target;
};

/// Stacks examples into a batch (data and target each gain a leading batch dim).
Example default_collate(const std::vector<Example>& examples);

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::size_t size() const = 0;
  virtual Example get(std::size_t index) const = 0;
  /// The batch of these indices. The default collates get(i); datasets that can gather a
  /// batch in one op (TensorDataset: one index_select) override it.
  virtual Example get_batch(const std::vector<std::size_t>& indices) const;
  /// Called by the DataLoader before each epoch (random transforms vary with it).
  virtual void set_epoch(std::int64_t) {}
};

/// Rows of `data` and `targets` (same length along dim 0), returned as views.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  std::size_t size() const override;
  Example get(std::size_t index) const override;
  Example get_batch(const std::vector<std::size_t>& indices) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_, targets_;
};

/// The examples of `base` at `indices`, in that order.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<Dataset> base, std::vector<std::size_t> indices);
  std::size_t size() const override { return indices_.size(); }
  Example get(std::size_t index) const override;
  Example get_batch(const std::vector<std::size_t>& indices) const override;
  void set_epoch(std::int64_t epoch) override;
  const std::vector<std::size_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<Dataset> base_;
  std::vector<std::size_t> indices_;
};

/// Datasets one after the other.
class ConcatDataset : public Dataset {
 public:
  explicit ConcatDataset(std::vector<std::shared_ptr<Dataset>> parts);
  std::size_t size() const override { return offsets_.back(); }
  Example get(std::size_t index) const override;

 private:
  std::vector<std::shared_ptr<Dataset>> parts_;
  std::vector<std::size_t> offsets_;  // cumulative sizes, starting at 0
};

/// Splits `dataset` into non-overlapping random subsets of the given lengths (which must add
/// up to its size), reproducibly for a seed.
std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<Dataset> dataset,
                                                  const std::vector<std::size_t>& lengths, std::uint64_t seed);

/// A random source for one sample in one epoch: transforms draw from it, so that results
/// do not depend on which worker thread loads the sample.
using Rng = std::mt19937_64;
using Transform = std::function<Tensor(const Tensor&, Rng&)>;

/// Applies `transform` to the data of every example of `base`. The random stream of sample i
/// in epoch e is seeded from (seed, e, i).
class TransformDataset : public Dataset {
 public:
  TransformDataset(std::shared_ptr<Dataset> base, Transform transform, std::uint64_t seed = 0);
  std::size_t size() const override { return base_->size(); }
  Example get(std::size_t index) const override;
  void set_epoch(std::int64_t epoch) override { epoch_ = epoch; }

 private:
  std::shared_ptr<Dataset> base_;
  Transform transform_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0;
};

}  // namespace kiln::data
