// core/cuda/stub.cpp — the CUDA backend when Kiln is built without nvcc: nothing is
// available, and every request for CUDA memory says why it cannot be served.
// Read next: core/cuda/cuda.h.
#include "core/cuda/cuda.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {
[[noreturn]] void not_built() {
  KILN_FAIL("Kiln was not compiled with CUDA enabled (configure with -DKILN_CUDA=ON on a "
            "machine with nvcc); CUDA tensors and pinned memory are unavailable in this build");
}
}  // namespace

bool is_built() { return false; }
bool is_available() { return false; }
int device_count() { return 0; }
int current_device() { not_built(); }
void set_device(int) { not_built(); }
void synchronize(int) { not_built(); }
void manual_seed(std::uint64_t) {}
Allocator* device_allocator(int) { not_built(); }
Allocator* host_allocator() { not_built(); }
void copy_bytes(void*, Device, const void*, Device, std::size_t, bool) { not_built(); }
void register_kernels(BackendKernels&) {}

}  // namespace kiln::cuda
