// core/cuda/stub.cpp — the CUDA backend when Kiln is built without nvcc: nothing is
// available, and every request for CUDA memory, streams or events says why it cannot be
// served (PyTorch's "Torch not compiled with CUDA enabled", in Kiln's words).
// Read next: core/cuda/cuda.h.
#include <atomic>

#include "core/cuda/cuda.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {
[[noreturn]] void not_built() {
  KILN_FAIL("Kiln was not compiled with CUDA enabled (configure with -DKILN_CUDA=ON on a "
            "machine with nvcc); CUDA tensors, streams and pinned memory are unavailable in this build");
}
std::atomic<bool> tf32{false};
}  // namespace

bool is_built() { return false; }
bool is_available() { return false; }
int device_count() { return 0; }
int current_device() { not_built(); }
void set_device(int) { not_built(); }
void synchronize(int) { not_built(); }
void manual_seed(std::uint64_t) {}
std::pair<std::uint64_t, std::uint64_t> generator_state() { not_built(); }
void set_generator_state(std::uint64_t, std::uint64_t) { not_built(); }

DeviceGuard::DeviceGuard(int) : previous_(0) { not_built(); }
DeviceGuard::~DeviceGuard() = default;

Stream Stream::create(int, int) { not_built(); }
Stream Stream::default_stream(int) { not_built(); }
bool Stream::query() const { not_built(); }
void Stream::synchronize() const { not_built(); }
Stream current_stream(int) { not_built(); }
void set_current_stream(const Stream&) { not_built(); }
StreamGuard::StreamGuard(const Stream&) : previous_device_(0) { not_built(); }
StreamGuard::~StreamGuard() = default;

Event::Event(bool) : timing_(false) { not_built(); }
void Event::record() { not_built(); }
void Event::record(const Stream&) { not_built(); }
void Event::block(const Stream&) const { not_built(); }
bool Event::query() const { not_built(); }
void Event::synchronize() const { not_built(); }
float Event::elapsed_time(const Event&) const { not_built(); }

Allocator* device_allocator(int) { not_built(); }
MemoryStats memory_stats(int) { not_built(); }
std::int64_t memory_allocated(int) { not_built(); }
std::int64_t max_memory_allocated(int) { not_built(); }
std::int64_t memory_reserved(int) { not_built(); }
std::int64_t max_memory_reserved(int) { not_built(); }
void reset_peak_memory_stats(int) { not_built(); }
std::string memory_summary(int) { not_built(); }
std::pair<std::size_t, std::size_t> mem_get_info(int) { not_built(); }
void empty_cache() {}  // nothing cached, as torch.cuda.empty_cache() before CUDA is initialised

Allocator* host_allocator() { not_built(); }
void record_host_use(const void*, const Stream&) {}
void copy_bytes(void*, Device, const void*, Device, std::size_t, bool) { not_built(); }

void set_allow_tf32(bool allow) { tf32 = allow; }
bool allow_tf32() { return tf32; }

void register_kernels(BackendKernels&) {}

}  // namespace kiln::cuda
