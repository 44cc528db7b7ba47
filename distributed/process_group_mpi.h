// distributed/process_group_mpi.h — the MPI backend: a process group over MPI_COMM_WORLD of a
// program started with `mpirun -np N`. CPU tensors go to MPI as they are (a contiguous staging
// copy for non-contiguous ones); CUDA tensors are staged through pinned host memory unless the
// MPI library reports CUDA awareness. Float16 and BFloat16 reduce through MPI operations of
// Kiln's own, as MPI has no such types.
//
// Note [Two threads talk to MPI]: each group owns two threads, and only they call MPI after
// initialisation. The collective thread runs the queued collectives one after another, in
// call order, so every rank runs them in the same order; it uses MPI's blocking collectives,
// which Open MPI tunes (a 2 MiB all-reduce between two local ranks: 0.68 ms blocking, 1.4 ms
// non-blocking polled to completion). The caller gets a Work at once, which is what lets DDP
// overlap all-reduce with backward. The watchdog thread answers the peers' pings and failure
// notices on a communicator of its own every millisecond, and fails the collective in flight
// when a peer reports that it failed (Note [Nothing hangs forever]). Needs
// MPI_THREAD_MULTIPLE.
// Read next: distributed/data_parallel.h.
#pragma once

#include <chrono>
#include <memory>

#include "distributed/process_group.h"

namespace kiln::distributed {

/// Whether this build of Kiln has the MPI backend (Debian's libopenmpi-dev at configure time).
bool mpi_is_available();

/// Initialises MPI on first use (finalised at exit) and returns a group over all of
/// MPI_COMM_WORLD's processes; throws if Kiln was built without MPI.
std::shared_ptr<ProcessGroup> new_mpi_process_group(std::chrono::milliseconds timeout);

}  // namespace kiln::distributed
