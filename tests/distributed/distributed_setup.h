// tests/distributed/distributed_setup.h — the default process group for the distributed
// tests, set up by the first test that needs it and kept until the process exits (MPI can be
// initialised once per process). A minute's timeout: a broken test fails instead of hanging.
#pragma once

#include <chrono>

#include "distributed/distributed.h"

namespace kiln::distributed {

inline void ensure_process_group() {
  if (!is_initialized()) init_process_group({.timeout = std::chrono::seconds(60)});
}

}  // namespace kiln::distributed
