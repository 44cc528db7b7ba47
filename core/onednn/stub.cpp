// core/onednn/stub.cpp — the CPU without oneDNN (KILN_ONEDNN=OFF, or libdnnl-dev not found):
// the CPU table keeps its Eigen kernels and composite graphs, and the backends:: queries say
// there is no library route.
// Read next: core/onednn/onednn.h.
#include "core/backends.h"
#include "core/onednn/onednn.h"

namespace kiln::onednn {

void register_kernels(BackendKernels&) {}

}  // namespace kiln::onednn

namespace kiln::backends {

bool onednn_is_available() { return false; }
std::string onednn_cpu_isa() { return ""; }
bool onednn_has_bf16() { return false; }
OneDnnStats onednn_stats() { return {}; }

}  // namespace kiln::backends
