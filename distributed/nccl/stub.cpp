// distributed/nccl/stub.cpp — the NCCL backend of a Kiln built without NCCL (or without the
// CUDA backend): it says what the build lacked.
#include "distributed/process_group_nccl.h"

namespace kiln::distributed {

bool nccl_is_available() { return false; }

namespace {
[[noreturn]] void not_built() {
  KILN_CHECK_AS(DistBackendError, false,
                "Kiln was built without NCCL: the nccl backend needs the CUDA backend and NCCL (nccl.h and libnccl, "
                "which the CUDA toolkit carries) at configure time");
  std::abort();
}
}  // namespace

NcclUniqueId nccl_unique_id() { not_built(); }

std::shared_ptr<ProcessGroup> new_nccl_process_group(const NcclGroupOptions&) { not_built(); }

}  // namespace kiln::distributed
