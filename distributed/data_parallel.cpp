// distributed/data_parallel.cpp — nn::DistributedDataParallel (Note [Buckets overlap
// backward]); in kiln::nn though its file is in distributed/ (Note [DDP's name and its folder]).
#include "distributed/data_parallel.h"

#include <sstream>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "core/creation.h"
#include "core/grad_mode.h"
#include "distributed/distributed.h"

namespace kiln::nn {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A parameter's description for the cross-rank comparison: dtype, rank and sizes, padded.
constexpr std::size_t kMaxDims = 8;
constexpr std::size_t kMetaWidth = 2 + kMaxDims;

std::string describe_meta(const std::int64_t* m) {
  std::ostringstream os;
  os << static_cast<DType>(m[0]) << " [";
  for (std::int64_t d = 0; d < m[1]; ++d) os << (d ? ", " : "") << m[2 + d];
  os << "]";
  return os.str();
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedDataParallelOptions options)
    : Module("DistributedDataParallel"), options_(std::move(options)) {
  KILN_CHECK_VALUE(module != nullptr, "DistributedDataParallel needs a module");
  KILN_CHECK_VALUE(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0,
                   "DistributedDataParallel: bucket sizes must be positive, got bucket_cap_mb ",
                   options_.bucket_cap_mb, " and first_bucket_cap_mb ", options_.first_bucket_cap_mb);
  group_ = options_.process_group ? options_.process_group : distributed::default_group_ptr();
  module_ = register_module("module", std::move(module));
  std::vector<std::pair<std::string, Tensor>> named;
  for (auto& [name, p] : named_parameters()) {  // "module.fc1.weight", as PyTorch names them
    if (p.requires_grad()) named.emplace_back(name, p);
  }
  verify_same_model_across_ranks(named);
  for (auto& [name, p] : named) {
    names_.push_back(name);
    params_.push_back(p);
  }
  broadcast_from_rank_zero(module_->parameters());
  broadcast_from_rank_zero(module_->buffers());
  build_buckets();
  ready_.assign(params_.size(), false);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    hooks_.push_back(params_[i].register_post_accumulate_grad_hook([this, i](const Tensor&) { mark_ready(i); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (HookHandle& h : hooks_) h.remove();
}

void DistributedDataParallel::verify_same_model_across_ranks(
    const std::vector<std::pair<std::string, Tensor>>& named) {
  const int world = group_->size();
  if (world == 1) return;
  const auto local_count = static_cast<std::int64_t>(named.size());
  Tensor count = full({1}, local_count, TensorOptions().dtype(kInt64));
  std::vector<Tensor> counts;
  for (int r = 0; r < world; ++r) counts.push_back(empty({1}, TensorOptions().dtype(kInt64)));
  group_->all_gather(counts, count)->wait();
  for (int r = 0; r < world; ++r) {
    const std::int64_t theirs = counts[static_cast<std::size_t>(r)].item<std::int64_t>();
    const std::int64_t zeros = counts[0].item<std::int64_t>();
    KILN_CHECK_VALUE(theirs == zeros, "DDP expects same model across all ranks, but Rank ", r, " has ", theirs,
                     " params, while rank 0 has inconsistent ", zeros, " params.");
  }
  std::vector<std::int64_t> meta(named.size() * kMetaWidth, -1);
  for (std::size_t i = 0; i < named.size(); ++i) {
    const Tensor& p = named[i].second;
    KILN_CHECK_VALUE(p.dim() <= static_cast<std::int64_t>(kMaxDims), "DistributedDataParallel: parameter '",
                     named[i].first, "' has ", p.dim(), " dimensions, at most ", kMaxDims, " are supported");
    meta[i * kMetaWidth] = static_cast<std::int64_t>(p.dtype());
    meta[i * kMetaWidth + 1] = p.dim();
    for (std::int64_t d = 0; d < p.dim(); ++d) meta[i * kMetaWidth + 2 + static_cast<std::size_t>(d)] = p.size(d);
  }
  if (meta.empty()) return;
  const Tensor local = tensor(meta, {static_cast<std::int64_t>(meta.size())});
  std::vector<Tensor> metas;
  for (int r = 0; r < world; ++r) metas.push_back(empty_like(local));
  group_->all_gather(metas, local)->wait();
  const std::int64_t* zero = metas[0].data_ptr<std::int64_t>();
  // Parameter by parameter, then rank by rank: every rank finds the same first difference.
  for (std::size_t i = 0; i < named.size(); ++i) {
    for (int r = 1; r < world; ++r) {
      const std::int64_t* theirs = metas[static_cast<std::size_t>(r)].data_ptr<std::int64_t>();
      const bool same = std::equal(zero + i * kMetaWidth, zero + (i + 1) * kMetaWidth, theirs + i * kMetaWidth);
      KILN_CHECK_VALUE(same, "DDP expects same model across all ranks, but parameter ", i, " ('", named[i].first,
                       "' on this rank) is ", describe_meta(zero + i * kMetaWidth), " on rank 0 and ",
                       describe_meta(theirs + i * kMetaWidth), " on rank ", r, ".");
    }
  }
}

void DistributedDataParallel::broadcast_from_rank_zero(const TensorList& tensors) {
  if (group_->size() == 1) return;
  NoGradGuard no_grad;
  std::vector<std::shared_ptr<distributed::Work>> works;
  for (Tensor t : tensors) works.push_back(group_->broadcast(t, 0));
  for (auto& w : works) w->wait();
}

void DistributedDataParallel::build_buckets() {
  // Reverse registration order, one open bucket per (dtype, device); a bucket closes when it
  // reaches its limit: first_bucket_cap_mb for the first of its kind, bucket_cap_mb after.
  struct Open {
    Open(DType d, Device where) : dtype(d), device(where) {}
    DType dtype;
    Device device;
    std::int64_t bytes = 0;
    bool first = true;
    std::vector<std::size_t> params;
  };
  std::vector<Open> open;
  std::vector<std::vector<std::size_t>> closed;
  auto limit = [&](const Open& o) {
    return static_cast<std::int64_t>((o.first ? options_.first_bucket_cap_mb : options_.bucket_cap_mb) * 1024 * 1024);
  };
  for (std::size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    auto it = std::find_if(open.begin(), open.end(),
                           [&](const Open& o) { return o.dtype == p.dtype() && o.device == p.device(); });
    if (it == open.end()) it = open.insert(open.end(), Open(p.dtype(), p.device()));
    it->params.push_back(k);
    it->bytes += p.numel() * static_cast<std::int64_t>(itemsize(p.dtype()));
    if (it->bytes >= limit(*it)) {
      closed.push_back(std::move(it->params));
      it->params.clear();
      it->bytes = 0;
      it->first = false;
    }
  }
  for (Open& o : open) {
    if (!o.params.empty()) closed.push_back(std::move(o.params));
  }
  // The bucket holding the latest-registered parameter first: that is the order in which
  // backward completes them.
  std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.front() > b.front(); });
  bucket_of_.assign(params_.size(), 0);
  for (std::vector<std::size_t>& indices : closed) {
    Bucket b;
    b.params = std::move(indices);
    std::int64_t offset = 0;
    for (std::size_t i : b.params) {
      b.offsets.push_back(offset);
      offset += params_[i].numel();
      bucket_of_[i] = buckets_.size();
    }
    const Tensor& first = params_[b.params.front()];
    b.flat = empty({offset}, TensorOptions().dtype(first.dtype()).device(first.device()));
    buckets_.push_back(std::move(b));
  }
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (expect_hooks_ && reduction_started_) {
      std::string unused;
      for (std::size_t i = 0; i < params_.size(); ++i) {
        if (!ready_[i]) unused += (unused.empty() ? "" : ", ") + names_[i];
      }
      KILN_FAIL("Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your module has parameters that were not used in producing loss. You can enable "
                "unused parameter detection by passing the keyword argument `find_unused_parameters=true` to "
                "`DistributedDataParallel`, and by making sure all `forward` function outputs participate in "
                "calculating loss.\nParameters that did not receive a gradient on this rank: ", unused);
    }
  }
  if (options_.broadcast_buffers) broadcast_from_rank_zero(module_->buffers());
  Tensor output = module_->forward(input);
  if (is_grad_enabled() && require_sync_ && !params_.empty()) prepare_for_backward(output);
  return output;
}

void DistributedDataParallel::prepare_for_backward(const Tensor& output) {
  std::lock_guard<std::mutex> lock(mutex_);
  expect_hooks_ = true;
  reduction_started_ = false;
  next_bucket_ = 0;
  ready_.assign(params_.size(), false);
  locally_used_.assign(params_.size(), true);
  for (Bucket& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  events_.clear();
  stats_ = {};
  if (!options_.find_unused_parameters) return;
  // The parameters this output's graph reaches; the others get no gradient and are ready now.
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<std::shared_ptr<autograd::Node>> stack;
  if (output.grad_fn()) stack.push_back(output.grad_fn());
  while (!stack.empty()) {
    std::shared_ptr<autograd::Node> node = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert(node.get()).second) continue;
    if (const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(node.get())) {
      reached.insert(acc->variable().impl());
    }
    for (const autograd::Edge& e : node->next_edges()) {
      if (e.function) stack.push_back(e.function);
    }
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (reached.count(params_[i].impl()) == 0) {
      ready_[i] = true;
      locally_used_[i] = false;
      --buckets_[bucket_of_[i]].pending;
    }
  }
}

void DistributedDataParallel::mark_ready(std::size_t param) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!expect_hooks_) return;  // a backward that no synchronised forward prepared (no_sync)
  KILN_CHECK(!ready_[param], "Expected to mark a variable ready only once. This error is caused by one of the "
             "following reasons: 1) Use of a module parameter outside the `forward` function. 2) Reused parameters "
             "in multiple reentrant backward passes. (parameter '", names_[param], "')");
  const Clock::time_point now = Clock::now();
  if (!reduction_started_) first_ready_ = now;
  reduction_started_ = true;
  ready_[param] = true;
  events_.push_back({DdpEvent::Kind::GradientReady, param});
  --buckets_[bucket_of_[param]].pending;
  launch_ready_buckets();
  if (next_bucket_ == buckets_.size()) {
    stats_.backward_seconds = seconds_between(first_ready_, now);
    finish_reduction();
  }
}

void DistributedDataParallel::launch_ready_buckets() {
  NoGradGuard no_grad;
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_];
    if (group_->size() == 1) {  // the average of one rank: nothing to send or copy
      events_.push_back({DdpEvent::Kind::BucketLaunched, next_bucket_});
      ++next_bucket_;
      continue;
    }
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      Tensor slot = b.flat.narrow(0, b.offsets[k], p.numel());
      if (p.grad().defined()) {
        slot.copy_(p.grad().reshape({-1}));
      } else {
        slot.zero_();  // unused here (find_unused_parameters); maybe not on another rank
      }
    }
    b.work = group_->all_reduce(b.flat, distributed::ReduceOp::AVG);
    events_.push_back({DdpEvent::Kind::BucketLaunched, next_bucket_});
    stats_.bytes_reduced += b.flat.numel() * static_cast<std::int64_t>(itemsize(b.flat.dtype()));
    ++next_bucket_;
  }
}

void DistributedDataParallel::finish_reduction() {
  NoGradGuard no_grad;
  const Clock::time_point waiting = Clock::now();
  for (Bucket& b : buckets_) {
    if (b.work) b.work->wait();
  }
  // PyTorch leaves the gradient of a parameter that no rank used as it was (None): which
  // ones those are takes one more all-reduce of the ranks' "used" flags.
  std::vector<bool> used_anywhere(params_.size(), true);
  if (options_.find_unused_parameters && group_->size() > 1) {
    Tensor used = zeros({static_cast<std::int64_t>(params_.size())}, TensorOptions().dtype(kInt32));
    std::int32_t* flags = used.data_ptr<std::int32_t>();
    for (std::size_t i = 0; i < params_.size(); ++i) flags[i] = locally_used_[i] ? 1 : 0;
    group_->all_reduce(used, distributed::ReduceOp::MAX)->wait();
    for (std::size_t i = 0; i < params_.size(); ++i) used_anywhere[i] = flags[i] != 0;
  }
  stats_.exposed_seconds = seconds_between(waiting, Clock::now());
  for (Bucket& b : buckets_) {
    if (!b.work) continue;  // world size 1
    stats_.communication_seconds += seconds_between(b.work->posted_at(), b.work->completed_at());
    for (std::size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = params_[b.params[k]];
      if (!used_anywhere[b.params[k]]) continue;
      const Tensor average = b.flat.narrow(0, b.offsets[k], p.numel()).view(p.sizes());
      if (p.grad().defined()) {
        p.grad().copy_(average);
      } else {
        p.mutable_grad() = average.clone();
      }
    }
    b.work.reset();
  }
  stats_.buckets = buckets_.size();
  events_.push_back({DdpEvent::Kind::ReductionFinished, 0});
  expect_hooks_ = false;
  reduction_started_ = false;
}

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_indices() const {
  std::vector<std::vector<std::size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

std::vector<DdpEvent> DistributedDataParallel::last_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

DdpStepStats DistributedDataParallel::last_step_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace kiln::nn
