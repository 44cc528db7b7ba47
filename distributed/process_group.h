// distributed/process_group.h — a group of processes that run collectives together: the
// interface both backends implement (MPI for CPU tensors, NCCL for CUDA tensors), and the work
// handle every collective returns. Names and semantics follow torch.distributed:
// all_reduce, broadcast, all_gather, reduce_scatter and barrier, each with a Work whose wait()
// blocks until the result is in the tensors.
//
// Note [Nothing hangs forever]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective waits at most the group's timeout. When it runs
// out, the group asks every peer whether it is alive (a ping on a side channel that each
// rank's communication thread answers at once), and the error names the ranks that did not
// answer, or says that all answered and one of them has not reached this collective. A rank
// that fails on purpose (report_failure, or an uncaught exception once the default group is
// up) tells its peers first, so they fail with its rank and its message instead of waiting.
// On the MPI backend, ranks that call different collectives, or the same one with other
// sizes, fail at once on every rank before any data moves (Note [Collective fingerprints]).
// Read next: distributed/distributed.h (the default group and free functions).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace kiln::distributed {

/// A collective failed: a peer died or raised, or the timeout ran out
/// (torch.distributed.DistBackendError).
class DistBackendError : public Error {
  using Error::Error;
};

/// How all_reduce and reduce_scatter combine the ranks' values (torch.distributed.ReduceOp).
/// AVG is the sum divided by the world size, for floating-point tensors.
enum class ReduceOp { SUM, AVG, MIN, MAX };
const char* reduce_op_name(ReduceOp op);

/// The handle of one collective (torch.distributed.Work). wait() blocks until the result is in
/// the tensors, or throws DistBackendError: a failed peer, or the group's timeout.
class Work {
 public:
  using Clock = std::chrono::steady_clock;
  /// `diagnose` is asked for the message when wait() runs out of time (Note [Nothing hangs
  /// forever]); `finish` runs once on the waiting thread when the collective has completed
  /// (copies into non-contiguous or device outputs, AVG's division).
  Work(std::string description, std::chrono::milliseconds timeout, std::function<std::string()> diagnose,
       std::function<void()> finish = {});
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  void wait();
  bool is_completed() const;
  const std::string& description() const { return description_; }
  /// When the backend posted it and when it completed (for DDP's overlap figures).
  Clock::time_point posted_at() const;
  Clock::time_point completed_at() const;

  // The backend's side.
  void mark_posted();
  void mark_completed();
  void mark_failed(const std::string& message);

 private:
  std::string description_;
  std::chrono::milliseconds timeout_;
  std::function<std::string()> diagnose_;
  std::function<void()> finish_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool completed_ = false, finished_ = false;
  std::optional<std::string> error_;
  Clock::time_point posted_at_{}, completed_at_{};
};

/// A group of `size()` processes; this one is `rank()`. Every rank must call the same
/// collectives in the same order. Inputs may be non-contiguous and of any dtype the backend
/// serves; results are written in place.
class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, int local_rank, std::chrono::milliseconds timeout);
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// This process's rank among those on its own machine (which GPU it should use).
  int local_rank() const { return local_rank_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  virtual std::string backend() const = 0;

  /// Combines `tensor` across ranks in place.
  std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM);
  /// Copies rank `src`'s `tensor` into everyone's.
  std::shared_ptr<Work> broadcast(Tensor& tensor, int src);
  /// outputs[r] receives rank r's `input`; `outputs` holds size() tensors shaped like it.
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input);
  /// `output` receives the combination over ranks of their inputs[rank()].
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::SUM);
  std::shared_ptr<Work> barrier();

  /// Tells every peer that this rank failed with `message`: their pending and later
  /// collectives throw DistBackendError naming this rank (Note [Nothing hangs forever]).
  virtual void report_failure(const std::string& message) = 0;
  /// The failure a peer reported to this rank, if any (what a group built on top of this one,
  /// as NCCL's is on MPI's, watches for).
  virtual std::optional<std::string> peer_failure() { return std::nullopt; }

 protected:
  virtual std::shared_ptr<Work> do_all_reduce(Tensor& tensor, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> do_broadcast(Tensor& tensor, int src) = 0;
  virtual std::shared_ptr<Work> do_all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  virtual std::shared_ptr<Work> do_reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                                  ReduceOp op) = 0;
  virtual std::shared_ptr<Work> do_barrier() = 0;

  // What every backend shares.
  /// "all_reduce (kiln.float32 [1000], SUM)": the first part of a collective's description.
  static std::string describe(const char* collective, const Tensor& t, const char* detail);
  /// all_gather's finish: rank r's slice of the flat `gathered` buffer into targets[r], in
  /// `input`'s shape (and the targets' dtype and layout).
  static std::function<void()> copy_gathered(std::vector<Tensor> targets, Tensor gathered, const Tensor& input);

 private:
  int rank_, size_, local_rank_;
  std::chrono::milliseconds timeout_;
};

}  // namespace kiln::distributed
