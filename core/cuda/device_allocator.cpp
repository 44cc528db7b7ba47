// core/cuda/device_allocator.cpp — device memory: Note [Caching allocator]'s algorithm
// (core/caching_allocator.h) over cudaMalloc/cudaFree, one cache per device, blocks tied to
// the stream that was current when they were allocated; plus the memory_* functions that
// report on it.
// Read next: core/cuda/host_allocator.cpp.
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/error.h"

namespace kiln::cuda {

namespace {

class CudaMemory final : public MemoryBackend {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* allocate_segment(std::size_t nbytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;  // the caching allocator frees cached segments and retries, or reports OOM
    }
    check(status, "cudaMalloc");
    return ptr;
  }
  void free_segment(void* ptr, std::size_t) override {
    DeviceGuard guard(device_);
    check(cudaFree(ptr), "cudaFree");
  }
  std::size_t total_bytes() const override { return info().second; }
  std::size_t free_bytes() const override { return info().first; }
  std::string name() const override { return "GPU " + std::to_string(device_); }

 private:
  std::pair<std::size_t, std::size_t> info() const {
    DeviceGuard guard(device_);
    std::size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return {free, total};
  }
  int device_;
};

class CudaDeviceAllocator final : public Allocator {
 public:
  explicit CudaDeviceAllocator(int device)
      : device_(device), memory_(device), cache_(memory_, CachingAllocatorConfig::from_environment()) {}
  DataPtr allocate(std::size_t nbytes) override {
    const auto stream = reinterpret_cast<StreamId>(current_stream(device_).handle());
    void* ptr = cache_.allocate(nbytes, stream);
    return DataPtr(ptr, this, &release, Device(DeviceType::CUDA, device_));
  }
  CachingAllocator& cache() { return cache_; }

 private:
  static void release(void* self, void* ptr) { static_cast<CudaDeviceAllocator*>(self)->cache_.free(ptr); }
  int device_;
  CudaMemory memory_;
  CachingAllocator cache_;
};

std::mutex allocators_mutex;
std::vector<CudaDeviceAllocator*> allocators;  // leaked on purpose: tensors may outlive main()

CudaDeviceAllocator& allocator(int device) {
  if (device < 0) device = current_device();
  KILN_CHECK(device < device_count(), "CUDA error: invalid device ordinal (device ", device, " requested, ",
             device_count(), " present)");
  std::lock_guard<std::mutex> lock(allocators_mutex);
  if (allocators.size() < static_cast<std::size_t>(device_count())) {
    allocators.resize(static_cast<std::size_t>(device_count()), nullptr);
  }
  auto& slot = allocators[static_cast<std::size_t>(device)];
  if (slot == nullptr) slot = new CudaDeviceAllocator(device);
  return *slot;
}

}  // namespace

Allocator* device_allocator(int device) {
  (void)current_device();  // explains a missing driver or device before anything else
  return &allocator(device);
}

MemoryStats memory_stats(int device) { return allocator(device).cache().stats(); }
std::int64_t memory_allocated(int device) { return memory_stats(device).allocated_bytes.current; }
std::int64_t max_memory_allocated(int device) { return memory_stats(device).allocated_bytes.peak; }
std::int64_t memory_reserved(int device) { return memory_stats(device).reserved_bytes.current; }
std::int64_t max_memory_reserved(int device) { return memory_stats(device).reserved_bytes.peak; }
void reset_peak_memory_stats(int device) { allocator(device).cache().reset_peak_stats(); }
std::string memory_summary(int device) { return allocator(device).cache().memory_summary(); }

std::pair<std::size_t, std::size_t> mem_get_info(int device) {
  if (device < 0) device = current_device();
  KILN_CHECK(device < device_count(), "CUDA error: invalid device ordinal (device ", device, " requested, ",
             device_count(), " present)");
  DeviceGuard guard(device);
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return {free, total};
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(allocators_mutex);
  for (CudaDeviceAllocator* a : allocators) {
    if (a != nullptr) a->cache().empty_cache();
  }
}

}  // namespace kiln::cuda
