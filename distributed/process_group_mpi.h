// distributed/process_group_mpi.h — the MPI backend: a process group over MPI_COMM_WORLD of a
// program started with `mpirun -np N`. CPU tensors go to MPI as they are (a contiguous staging
// copy for non-contiguous ones); CUDA tensors are staged through pinned host memory unless the
// MPI library reports CUDA awareness. Float16 and BFloat16 reduce through MPI operations of
// Kiln's own, as MPI has no such types.
//
// Note [Two threads talk to MPI]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each group owns two threads, and only they call MPI after
// initialisation. The collective thread runs the queued collectives one after another, in
// call order. Before each it swaps fingerprints with every peer on a communicator of their
// own (Note [Collective fingerprints]), then posts the collective with MPI's non-blocking call
// (MPI_Iallreduce, MPI_Ibcast, ...); it polls both with MPI_Test and backs off into sleep
// (Note [Waiting without spinning]), so a rank that waits for a late, absent or dead peer does
// not hold a core, as MPI's blocking calls did, and gives up when a peer reports its failure.
// Open MPI's non-blocking all-reduce picks a slow algorithm for Kiln's in-place reductions on
// few ranks, so Kiln asks it for a faster one (prefer_rabenseifner_iallreduce); with that, the
// collectives cost what the blocking ones cost. The caller gets a Work at once, which is what
// lets DDP overlap all-reduce with backward. The watchdog thread answers the peers' pings and
// failure notices on the side channel every millisecond (it receives whatever arrives there,
// so fingerprints must not); when a peer reports that it failed, it fails the queued
// collectives, and the collective thread the one in flight (Note [Nothing hangs forever]).
// Needs MPI_THREAD_MULTIPLE.
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
