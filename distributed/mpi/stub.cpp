// distributed/mpi/stub.cpp — the MPI backend of a Kiln built without MPI: it says how to get it.
#include "distributed/process_group_mpi.h"

namespace kiln::distributed {

bool mpi_is_available() { return false; }

std::shared_ptr<ProcessGroup> new_mpi_process_group(std::chrono::milliseconds) {
  KILN_CHECK_AS(DistBackendError, false,
                "Kiln was built without MPI: install Debian's libopenmpi-dev and openmpi-bin (scripts/setup.sh) "
                "and configure again");
}

}  // namespace kiln::distributed
