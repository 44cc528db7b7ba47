// core/cuda/runtime.cpp — the CUDA backend's runtime side: finding devices (and explaining
// their absence), the current device and stream per thread, streams, events, copies between
// host and device, and the generator state. Kernels live in the .cu files; memory in
// device_allocator.cpp and host_allocator.cpp.
// Read next: core/cuda/device_allocator.cpp.
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"
#include "core/tensor.h"

namespace kiln::cuda {

// ---------------------------------------------------------------------------------------
// Errors

void check(cudaError_t status, const char* call, std::source_location where) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();  // clear the sticky error so later calls are not blamed
  if (status == cudaErrorInsufficientDriver) {
    detail::throw_error<Error>(where, "Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
                                      "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx (",
                               call, ")");
  }
  if (status == cudaErrorNoDevice) {
    detail::throw_error<Error>(where, "CUDA error: no CUDA-capable device is detected (", call, ")");
  }
  if (status == cudaErrorMemoryAllocation) {
    detail::throw_error<OutOfMemoryError>(where, "CUDA error: out of memory (", call, ")");
  }
  detail::throw_error<Error>(where, "CUDA error: ", cudaGetErrorString(status), " (", call, ")");
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

// ---------------------------------------------------------------------------------------
// Devices

namespace {

struct Devices {
  cudaError_t status = cudaSuccess;
  int count = 0;
};

const Devices& devices() {
  static const Devices d = [] {
    Devices found;
    found.status = cudaGetDeviceCount(&found.count);
    if (found.status != cudaSuccess) {
      (void)cudaGetLastError();
      found.count = 0;
    }
    return found;
  }();
  return d;
}

/// Throws the reason no device can be used (no driver, no device), or an index error.
void require_device(int index) {
  const Devices& d = devices();
  if (d.status != cudaSuccess) check(d.status, "cudaGetDeviceCount");
  if (d.count == 0) check(cudaErrorNoDevice, "cudaGetDeviceCount");
  KILN_CHECK(index >= 0 && index < d.count, "CUDA error: invalid device ordinal (device ", index, " requested, ",
             d.count, " device", d.count == 1 ? "" : "s", " present)");
}

}  // namespace

bool is_built() { return true; }
bool is_available() { return devices().status == cudaSuccess && devices().count > 0; }
int device_count() { return is_available() ? devices().count : 0; }

int current_device() {
  require_device(0);
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

void set_device(int index) {
  require_device(index);
  check(cudaSetDevice(index), "cudaSetDevice");
}

void synchronize(int device) {
  DeviceGuard guard(device < 0 ? current_device() : device);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device()) {
  if (device != previous_) set_device(device);
}

DeviceGuard::~DeviceGuard() {
  int now = 0;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

// ---------------------------------------------------------------------------------------
// Streams and events

namespace {

/// This thread's current stream per device; empty = the default stream.
thread_local std::vector<std::shared_ptr<Stream>> current_streams;

int resolve(int device) { return device < 0 ? current_device() : device; }

}  // namespace

int device_of(const Tensor& t) { return resolve(t.device().index()); }

Stream Stream::create(int device, int priority) {
  device = resolve(device);
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority), "cudaStreamCreateWithPriority");
  std::shared_ptr<void> owner(stream, [](void* s) { (void)cudaStreamDestroy(static_cast<cudaStream_t>(s)); });
  return Stream(stream, device, std::move(owner));
}

Stream Stream::default_stream(int device) {
  device = resolve(device);
  require_device(device);
  return Stream(nullptr, device);
}

bool Stream::query() const {
  const cudaError_t status = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check(status, "cudaStreamQuery");
  return true;
}

void Stream::synchronize() const { check(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize"); }

Stream current_stream(int device) {
  device = resolve(device);
  require_device(device);
  if (device < static_cast<int>(current_streams.size()) && current_streams[static_cast<std::size_t>(device)]) {
    return *current_streams[static_cast<std::size_t>(device)];
  }
  return Stream(nullptr, device);
}

void set_current_stream(const Stream& stream) {
  require_device(stream.device());
  if (static_cast<int>(current_streams.size()) <= stream.device()) {
    current_streams.resize(static_cast<std::size_t>(stream.device()) + 1);
  }
  current_streams[static_cast<std::size_t>(stream.device())] = std::make_shared<Stream>(stream);
}

cudaStream_t current_cuda_stream(int device) { return static_cast<cudaStream_t>(current_stream(device).handle()); }

StreamGuard::StreamGuard(const Stream& stream)
    : previous_(std::make_shared<Stream>(current_stream(stream.device()))), previous_device_(current_device()) {
  set_device(stream.device());
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() {
  try {
    set_current_stream(*previous_);
    set_device(previous_device_);
  } catch (...) {
    // A destructor must not throw; the guard's device and stream were valid on entry.
  }
}

Event::Event(bool enable_timing) : timing_(enable_timing) {
  require_device(current_device());
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, enable_timing ? cudaEventDefault : cudaEventDisableTiming),
        "cudaEventCreateWithFlags");
  handle_ = std::shared_ptr<void>(event, [](void* e) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
}

void Event::record() { record(current_stream()); }

void Event::record(const Stream& stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(handle_.get()), static_cast<cudaStream_t>(stream.handle())),
        "cudaEventRecord");
}

void Event::block(const Stream& stream) const {
  check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()), static_cast<cudaEvent_t>(handle_.get()), 0),
        "cudaStreamWaitEvent");
}

bool Event::query() const {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle_.get()));
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  check(status, "cudaEventQuery");
  return true;
}

void Event::synchronize() const { check(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_.get())), "cudaEventSynchronize"); }

float Event::elapsed_time(const Event& end) const {
  KILN_CHECK(timing_ && end.timing_, "Both events must be created with enable_timing=true to measure elapsed time");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_.get()), static_cast<cudaEvent_t>(end.handle_.get())),
        "cudaEventElapsedTime");
  return ms;
}

// ---------------------------------------------------------------------------------------
// Copies

namespace {

bool is_pinned_host(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeHost;
}

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes,
                bool non_blocking) {
  if (nbytes == 0) return;
  KILN_CHECK(dst_device.is_cuda() || src_device.is_cuda(), "copy_bytes: neither side is a CUDA device");
  const int device = dst_device.is_cuda() ? dst_device.index() : src_device.index();
  DeviceGuard guard(device);
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index() != src_device.index()) {
    // Between GPUs: the source's queued work must finish before the peer copy reads it.
    current_stream(src_device.index()).synchronize();
    check(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(), nbytes, current_cuda_stream(device)),
          "cudaMemcpyPeerAsync");
    if (!non_blocking) current_stream(device).synchronize();
    return;
  }
  const Stream stream = current_stream(device);
  check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream.handle())),
        "cudaMemcpyAsync");
  if (dst_device.is_cuda() && src_device.is_cuda()) return;  // device to device: stream-ordered, like any kernel
  const void* host = dst_device.is_cuda() ? src : dst;
  if (non_blocking && is_pinned_host(host)) {
    record_host_use(host, stream);  // the pinned block must not be reused before the copy runs
    return;
  }
  // Pageable memory (or a blocking copy): wait, so the host sees or may reuse its bytes.
  stream.synchronize();
}

// ---------------------------------------------------------------------------------------
// Generator and TF32

namespace {
std::mutex generator_mutex;
std::uint64_t generator_seed = 67280421310721ULL;
std::uint64_t generator_offset = 0;
std::atomic<bool> tf32{false};
}  // namespace

void manual_seed(std::uint64_t seed) {
  std::lock_guard<std::mutex> lock(generator_mutex);
  generator_seed = seed;
  generator_offset = 0;
}

std::pair<std::uint64_t, std::uint64_t> generator_state() {
  std::lock_guard<std::mutex> lock(generator_mutex);
  return {generator_seed, generator_offset};
}

void set_generator_state(std::uint64_t seed, std::uint64_t offset) {
  std::lock_guard<std::mutex> lock(generator_mutex);
  generator_seed = seed;
  generator_offset = offset;
}

std::pair<std::uint64_t, std::uint64_t> philox_seed_and_offset(std::uint64_t counters) {
  std::lock_guard<std::mutex> lock(generator_mutex);
  const std::uint64_t offset = generator_offset;
  generator_offset += counters;
  return {generator_seed, offset};
}

void set_allow_tf32(bool allow) { tf32 = allow; }
bool allow_tf32() { return tf32; }

}  // namespace kiln::cuda
