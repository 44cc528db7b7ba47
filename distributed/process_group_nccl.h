// distributed/process_group_nccl.h — the NCCL backend: a process group of CUDA devices, one
// per rank, whose collectives run as NCCL kernels on a stream of the group's own. It is built
// when CMake finds nccl.h and libnccl beside the CUDA backend (cmake/KilnNccl.cmake); a stub
// that says so stands in otherwise.
//
// Note [NCCL's streams and the watchdog]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A collective is queued, not run, by the calling
// thread. The group's communication stream first waits for an event recorded on the caller's
// current stream (so the kernels that produced the inputs have finished), then runs NCCL's
// kernel, then records a completion event. A watchdog thread polls the events of the
// collectives in flight: a completed one marks its Work done, and one still running when the
// group's timeout runs out aborts the communicator (ncclCommAbort), which fails it and every
// later collective with an error naming the collective. The watchdog also fails everything
// when NCCL reports an asynchronous error (a peer's connection broke) or when the bootstrap
// group has heard that a peer failed (Note [Nothing hangs forever]). Work::wait() blocks the
// host until the collective completed, so after it the result is visible to every stream.
// The tensors a collective reads and writes are held until it completes: the caching
// allocator cannot hand their memory to someone else while NCCL still writes it.
//
// The ranks learn NCCL's unique id from a bootstrap group: the MPI group of a program started
// with mpirun (rank 0 makes the id and broadcasts it), as init_process_group({.backend =
// "nccl"}) does. Ranks in one process (threads) can share an id directly.
// Read next: distributed/data_parallel.h.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

#include "distributed/process_group.h"

namespace kiln::distributed {

/// Whether this build of Kiln has the NCCL backend (nccl.h and libnccl at configure time).
bool nccl_is_available();

/// NCCL's ncclUniqueId: the rendezvous every rank of one communicator must share.
using NcclUniqueId = std::array<std::uint8_t, 128>;
/// A fresh id (ncclGetUniqueId); one rank makes it and hands it to the others.
NcclUniqueId nccl_unique_id();

struct NcclGroupOptions {
  int rank = 0, size = 1;
  int local_rank = 0;
  /// The CUDA device this rank uses; -1: local_rank modulo the number of devices.
  int device = -1;
  NcclUniqueId id{};
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// Where failure notices come from and go to (the MPI group the id travelled on); may be null.
  std::shared_ptr<ProcessGroup> bootstrap;
};

/// Joins the communicator of `options.id` as rank `options.rank` of `options.size` (every
/// rank must call this, concurrently, within the timeout). Throws DistBackendError when Kiln
/// was built without NCCL, when there is no CUDA device, or when NCCL refuses.
std::shared_ptr<ProcessGroup> new_nccl_process_group(const NcclGroupOptions& options);

}  // namespace kiln::distributed
