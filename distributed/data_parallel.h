// distributed/data_parallel.h — nn::DistributedDataParallel: the same model on every rank,
// each on its own share of the batch, with gradients averaged across ranks during backward.
//   auto model = std::make_shared<Mlp>();
//   nn::DistributedDataParallel ddp(model);            // after init_process_group()
//   loss = cross_entropy(ddp.forward(x), y); loss.backward(); optimizer.step();
//
// Note [DDP's name and its folder]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The class keeps PyTorch's home, the nn namespace (torch.nn.parallel.DistributedDataParallel
// is an nn.Module), so code written against PyTorch reads the same here. Its file lives in
// distributed/ because it needs a ProcessGroup: distributed/ sits above nn (a Module, its
// parameters and their hooks) and beside the process groups, and nn/ knows nothing of
// communication. Putting the file in nn/ would make nn call up into distributed/; renaming the
// class to distributed::DistributedDataParallel would break the PyTorch name. So the file's
// folder says which layer it belongs to, and the namespace says what it is.
//
// Note [Buckets overlap backward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// As in PyTorch's reducer, gradients are averaged in buckets
// (parameters in reverse registration order, roughly the order backward produces their
// gradients; the first bucket 1 MiB so communication starts early, the others bucket_cap_mb).
// A post-accumulate-grad hook on every parameter counts its bucket down; when a bucket is
// complete, and every bucket before it has gone, its gradients are copied into one flat
// buffer and all-reduced asynchronously, while backward goes on computing the gradients of
// earlier layers. The hook of the last gradient waits for every bucket and writes the averages
// back into .grad, so backward returns with synchronised gradients. Buckets launch in the same
// order on every rank, which MPI and NCCL require.
// Read next: distributed/process_group.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "distributed/process_group.h"
#include "nn/module.h"

// In kiln::nn, not kiln::distributed (Note [DDP's name and its folder]).
namespace kiln::nn {

struct DistributedDataParallelOptions {
  /// The group to average over; null: distributed's default group.
  std::shared_ptr<distributed::ProcessGroup> process_group = nullptr;
  double bucket_cap_mb = 25.0;
  /// The first bucket's size (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES).
  double first_bucket_cap_mb = 1.0;
  /// Copy rank 0's buffers (BatchNorm's running statistics) to every rank at each forward.
  bool broadcast_buffers = true;
  /// Find the parameters a forward did not use and count them as ready, so that a model with
  /// unused parameters still reduces. A parameter no rank used keeps its .grad as it was.
  bool find_unused_parameters = false;
};

/// One backward's record, for tests and the overlap figures.
struct DdpEvent {
  enum class Kind { GradientReady, BucketLaunched, ReductionFinished };
  Kind kind;
  std::size_t index;  // the parameter, or the bucket
};

struct DdpStepStats {
  std::size_t buckets = 0;
  std::int64_t bytes_reduced = 0;
  double backward_seconds = 0.0;       // first gradient ready -> last gradient ready
  double communication_seconds = 0.0;  // sum over buckets of posted -> completed
  double exposed_seconds = 0.0;        // waiting for buckets after the last gradient was ready
  /// The share of communication that ran while backward was still computing.
  double hidden_fraction() const {
    return communication_seconds > 0 ? std::max(0.0, 1.0 - exposed_seconds / communication_seconds) : 0.0;
  }
};

class DistributedDataParallel : public Module {
 public:
  /// Checks that every rank has the same parameters (a clear error naming the first
  /// difference), copies rank 0's parameters and buffers to every rank, and hooks the
  /// parameters. A collective: every rank must construct it.
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& input) override;
  Module& module() const { return *module_; }
  distributed::ProcessGroup& process_group() const { return *group_; }

  /// Inside its scope, backward accumulates gradients locally without communicating; the
  /// first synchronised backward afterwards averages the accumulated sums (gradient
  /// accumulation, torch's `with ddp.no_sync():`).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp), previous_(ddp.require_sync_) {
      ddp.require_sync_ = false;
    }
    NoSync(NoSync&& other) noexcept : ddp_(std::exchange(other.ddp_, nullptr)), previous_(other.previous_) {}
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;
    ~NoSync() {
      if (ddp_) ddp_->require_sync_ = previous_;
    }

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  /// Buckets as indices into the synchronised parameters, in launch order.
  std::vector<std::vector<std::size_t>> bucket_indices() const;
  /// The synchronised parameters (those that require grad), in registration order.
  const TensorList& synchronised_parameters() const { return params_; }
  std::vector<DdpEvent> last_events() const;
  DdpStepStats last_step_stats() const;

 private:
  struct Bucket {
    std::vector<std::size_t> params;
    std::vector<std::int64_t> offsets;
    Tensor flat;
    std::size_t pending = 0;
    std::shared_ptr<distributed::Work> work;
  };

  void verify_same_model_across_ranks(const std::vector<std::pair<std::string, Tensor>>& named);
  void broadcast_from_rank_zero(const TensorList& tensors);
  void build_buckets();
  void prepare_for_backward(const Tensor& output);
  void mark_ready(std::size_t param);
  void launch_ready_buckets();
  void finish_reduction();

  std::shared_ptr<Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<distributed::ProcessGroup> group_;
  TensorList params_;
  std::vector<std::string> names_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;
  std::vector<HookHandle> hooks_;

  mutable std::mutex mutex_;
  bool require_sync_ = true;
  bool expect_hooks_ = false;       // the last forward prepared a synchronised backward
  bool reduction_started_ = false;  // a gradient of that backward is ready
  std::vector<bool> ready_;
  std::vector<bool> locally_used_;  // reached by this rank's last forward (find_unused_parameters)
  std::size_t next_bucket_ = 0;
  std::vector<DdpEvent> events_;
  DdpStepStats stats_;
  std::chrono::steady_clock::time_point first_ready_{};
};

}  // namespace kiln::nn
