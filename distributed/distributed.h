// distributed/distributed.h — torch.distributed's module-level API: one default process group
// per process, set up from the launcher's environment (mpirun), and the collectives as free
// functions on it.
//   kiln::distributed::init_process_group();            // under mpirun -np N
//   kiln::distributed::all_reduce(t, ReduceOp::SUM);     // blocks; {.async_op = true} returns at once
// Read next: distributed/process_group.h.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "distributed/process_group.h"

namespace kiln::distributed {

/// How long a collective may wait for its peers unless told otherwise: KILN_DIST_TIMEOUT
/// seconds when that is set (a positive number; anything else is an error), else
/// torch.distributed's default, 30 minutes.
std::chrono::milliseconds default_timeout();

struct InitOptions {
  /// "mpi": CPU tensors (CUDA ones staged through host memory); "nccl": CUDA tensors, one
  /// device per rank (MPI, when built, hands NCCL's unique id to the ranks).
  std::string backend = "mpi";
  /// How long a collective may wait for its peers.
  std::chrono::milliseconds timeout = default_timeout();
};

/// Sets up the default group. Once it is up, an uncaught exception on this rank is reported
/// to the peers before the process ends (Note [Nothing hangs forever]).
void init_process_group(const InitOptions& options = {});
bool is_initialized();
/// Drops the default group (its communication thread stops).
void destroy_process_group();
/// The default group; throws if init_process_group has not run.
ProcessGroup& default_group();
std::shared_ptr<ProcessGroup> default_group_ptr();

int get_rank();
int get_world_size();
/// This process's rank on its own machine.
int get_local_rank();

struct CollectiveOptions {
  bool async_op = false;  // return before the result is in (call wait() on the handle)
};
std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM, CollectiveOptions o = {});
std::shared_ptr<Work> broadcast(Tensor& tensor, int src, CollectiveOptions o = {});
std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions o = {});
std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op = ReduceOp::SUM,
                                     CollectiveOptions o = {});
std::shared_ptr<Work> barrier(CollectiveOptions o = {});

/// Checks, before a run starts, that every rank of the default group has the same value of
/// each named quantity (one all_gather of them all); otherwise throws DistBackendError on
/// every rank, naming the first that differs and each rank's value:
///   check_same_across_ranks({{"--batch-size", 64}, {"steps per epoch", loader.size()}});
///   // ranks disagree on --batch-size: rank 0 has 64, rank 1 has 128
/// Mismatched ranks would otherwise meet in collectives of different sizes.
void check_same_across_ranks(const std::vector<std::pair<std::string, std::int64_t>>& values);

}  // namespace kiln::distributed
