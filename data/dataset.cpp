// data/dataset.cpp — the dataset building blocks.
#include "data/dataset.h"

#include <algorithm>
#include <numeric>

#include "autograd/functions/index.h"
#include "core/creation.h"

namespace kiln::data {

Example default_collate(const std::vector<Example>& examples) {
  KILN_CHECK(!examples.empty(), "default_collate: an empty batch");
  TensorList data, targets;
  for (const Example& e : examples) {
    data.push_back(e.data);
    if (e.target.defined()) targets.push_back(e.target);
  }
  KILN_CHECK(targets.empty() || targets.size() == data.size(), "default_collate: some examples have targets and some do not");
  return {stack(data), targets.empty() ? Tensor() : stack(targets)};
}

Example Dataset::get_batch(const std::vector<std::size_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (std::size_t i : indices) {
    try {
      examples.push_back(get(i));
    } catch (const Error& e) {
      KILN_FAIL("loading sample ", i, " failed: ", e.message());
    }
  }
  return default_collate(examples);
}

TensorDataset::TensorDataset(Tensor data, Tensor targets) : data_(std::move(data)), targets_(std::move(targets)) {
  KILN_CHECK(data_.dim() >= 1, "TensorDataset: data must have a leading sample dim, got ", data_.sizes());
  KILN_CHECK(!targets_.defined() || (targets_.dim() >= 1 && targets_.sizes()[0] == data_.sizes()[0]),
             "Size mismatch between tensors: data has ", data_.sizes()[0], " samples but targets have ",
             targets_.defined() && targets_.dim() > 0 ? targets_.sizes()[0] : 0);
}

std::size_t TensorDataset::size() const { return static_cast<std::size_t>(data_.sizes()[0]); }

Example TensorDataset::get(std::size_t index) const {
  KILN_CHECK_INDEX(index < size(), "index ", index, " is out of range for a dataset of ", size(), " samples");
  const auto i = static_cast<std::int64_t>(index);
  return {data_.select(0, i), targets_.defined() ? targets_.select(0, i) : Tensor()};
}

Example TensorDataset::get_batch(const std::vector<std::size_t>& indices) const {
  std::vector<std::int64_t> idx(indices.begin(), indices.end());
  for (auto i : idx) KILN_CHECK_INDEX(static_cast<std::size_t>(i) < size(), "index ", i, " is out of range for a dataset of ", size(), " samples");
  const Tensor index = tensor(idx, TensorOptions().dtype(kInt64).device(data_.device()));
  return {data_.index_select(0, index), targets_.defined() ? targets_.index_select(0, index.to(targets_.device())) : Tensor()};
}

Subset::Subset(std::shared_ptr<Dataset> base, std::vector<std::size_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  for (std::size_t i : indices_) KILN_CHECK_INDEX(i < base_->size(), "Subset index ", i, " is out of range for a dataset of ", base_->size());
}

Example Subset::get(std::size_t index) const {
  KILN_CHECK_INDEX(index < indices_.size(), "index ", index, " is out of range for a Subset of ", indices_.size());
  return base_->get(indices_[index]);
}

Example Subset::get_batch(const std::vector<std::size_t>& indices) const {
  std::vector<std::size_t> mapped;
  for (std::size_t i : indices) {
    KILN_CHECK_INDEX(i < indices_.size(), "index ", i, " is out of range for a Subset of ", indices_.size());
    mapped.push_back(indices_[i]);
  }
  return base_->get_batch(mapped);
}

void Subset::set_epoch(std::int64_t epoch) { base_->set_epoch(epoch); }

ConcatDataset::ConcatDataset(std::vector<std::shared_ptr<Dataset>> parts) : parts_(std::move(parts)), offsets_{0} {
  for (const auto& p : parts_) offsets_.push_back(offsets_.back() + p->size());
}

Example ConcatDataset::get(std::size_t index) const {
  KILN_CHECK_INDEX(index < size(), "index ", index, " is out of range for a ConcatDataset of ", size());
  const auto part = static_cast<std::size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), index) - offsets_.begin() - 1);
  return parts_[part]->get(index - offsets_[part]);
}

std::vector<std::shared_ptr<Subset>> random_split(std::shared_ptr<Dataset> dataset, const std::vector<std::size_t>& lengths,
                                                  std::uint64_t seed) {
  const std::size_t total = std::accumulate(lengths.begin(), lengths.end(), std::size_t{0});
  KILN_CHECK_VALUE(total == dataset->size(), "Sum of input lengths does not equal the length of the input dataset! (",
                   total, " vs ", dataset->size(), ")");
  std::vector<std::size_t> order(total);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Rng rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::shared_ptr<Subset>> parts;
  std::size_t start = 0;
  for (std::size_t n : lengths) {
    parts.push_back(std::make_shared<Subset>(dataset, std::vector<std::size_t>(order.begin() + static_cast<std::ptrdiff_t>(start),
                                                                                order.begin() + static_cast<std::ptrdiff_t>(start + n))));
    start += n;
  }
  return parts;
}

TransformDataset::TransformDataset(std::shared_ptr<Dataset> base, Transform transform, std::uint64_t seed)
    : base_(std::move(base)), transform_(std::move(transform)), seed_(seed) {}

Example TransformDataset::get(std::size_t index) const {
  Example e = base_->get(index);
  // A stream per (seed, epoch, sample): the same augmentation whatever thread loads it.
  const auto lo = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  const auto hi = [](std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); };
  std::seed_seq seq{lo(seed_), hi(seed_), lo(static_cast<std::uint64_t>(epoch_)), lo(index), hi(index)};
  Rng rng(seq);
  e.data = transform_(e.data, rng);
  return e;
}

}  // namespace kiln::data
