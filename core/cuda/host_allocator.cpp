// core/cuda/host_allocator.cpp — pinned host memory: cudaHostAlloc'd blocks cached by a
// FencedBlockCache (core/fenced_block_cache.h), fenced with CUDA events recorded on the
// streams of non_blocking copies, so a block is never reused while a copy from it may run.
// Read next: core/cuda/blas.cpp.
#include <cuda_runtime_api.h>

#include "core/cuda/cuda.h"
#include "core/cuda/cuda_check.h"
#include "core/fenced_block_cache.h"

namespace kiln::cuda {

namespace {

class PinnedSource final : public HostBlockSource {
 public:
  void* allocate(std::size_t nbytes) override {
    void* ptr = nullptr;
    check(cudaHostAlloc(&ptr, nbytes, cudaHostAllocDefault), "cudaHostAlloc");
    return ptr;
  }
  void free(void* ptr, std::size_t) override { check(cudaFreeHost(ptr), "cudaFreeHost"); }
};

class EventFence final : public Fence {
 public:
  explicit EventFence(const Stream& stream) { event_.record(stream); }
  bool done() const override { return event_.query(); }
  void wait() override { event_.synchronize(); }

 private:
  Event event_;
};

class PinnedAllocator final : public Allocator {
 public:
  PinnedAllocator() : cache_(source_) {}
  DataPtr allocate(std::size_t nbytes) override {
    return DataPtr(cache_.allocate(nbytes), this, &release, Device(DeviceType::CPU));
  }
  bool is_pinned() const override { return true; }
  FencedBlockCache& cache() { return cache_; }

 private:
  static void release(void* self, void* ptr) { static_cast<PinnedAllocator*>(self)->cache_.free(ptr); }
  PinnedSource source_;
  FencedBlockCache cache_;
};

PinnedAllocator& pinned() {
  static auto* allocator = new PinnedAllocator();  // leaked on purpose: tensors may outlive main()
  return *allocator;
}

}  // namespace

Allocator* host_allocator() {
  (void)current_device();  // explains a missing driver or device before allocating
  return &pinned();
}

void record_host_use(const void* ptr, const Stream& stream) {
  if (!pinned().cache().owns(ptr)) return;
  DeviceGuard guard(stream.device());
  pinned().cache().record_use(ptr, std::make_shared<EventFence>(stream));
}

}  // namespace kiln::cuda
