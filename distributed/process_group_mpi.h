// distributed/process_group_mpi.h — the MPI backend: a process group over MPI_COMM_WORLD of a
// program started with `mpirun -np N`. CPU tensors go to MPI as they are (a contiguous staging
// copy for non-contiguous ones); CUDA tensors are staged through pinned host memory unless the
// MPI library reports CUDA awareness. Float16 and BFloat16 reduce through MPI operations of
// Kiln's own, as MPI has no such types.
//
// Note [One thread talks to MPI]: each group owns a communication thread, and it alone calls
// MPI after initialisation. Collectives are queued in call order, so every rank posts them in
// the same order; the thread posts each one non-blocking, polls it to completion and answers
// its peers' pings and failure notices meanwhile (Note [Nothing hangs forever]). The caller
// gets a Work at once, which is what lets DDP overlap all-reduce with backward. Only
// MPI_THREAD_SERIALIZED is needed.
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
