// core/cuda/cuda.h — the CUDA backend as the rest of Kiln sees it. Two implementations sit
// behind these declarations: the real one (core/cuda/*.cu and *.cpp, built when nvcc is
// found) and a stub (core/cuda/stub.cpp) that reports "no CUDA" and throws clear errors. The
// build picks one, so no file outside core/cuda needs #ifdef. See Note [Layering] in
// core/tensor.h.
//
//   if (kiln::cuda::is_available()) {
//     kiln::cuda::Stream copies = kiln::cuda::Stream::create();
//     kiln::cuda::StreamGuard on(copies);                   // Kiln's work now queues there
//     kiln::Tensor x = batch.to(kiln::Device("cuda"), /*non_blocking=*/true);
//     std::cout << kiln::cuda::memory_summary();
//   }
//
// Read next: core/cuda/runtime.cpp (the real backend), core/cuda/stub.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "core/allocator.h"
#include "core/caching_allocator.h"
#include "core/device.h"

namespace kiln {
struct BackendKernels;
}

namespace kiln::cuda {

/// True when Kiln was compiled with the CUDA backend (says nothing about a device).
bool is_built();
/// True when the backend is built and at least one device is present and usable.
bool is_available();
int device_count();
int current_device();
void set_device(int index);
/// Waits for all work on `device` (-1: the current one).
void synchronize(int device = -1);
/// Seeds the CUDA generators (all devices).
void manual_seed(std::uint64_t seed);
/// The generator's (seed, Philox offset): all a resumed run needs to continue its stream.
std::pair<std::uint64_t, std::uint64_t> generator_state();
void set_generator_state(std::uint64_t seed, std::uint64_t offset);

/// Makes `device` current for its lifetime, then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

/// A CUDA stream: an ordered queue of work on one device. Cheap to copy (shared handle).
/// Kiln's kernels and library calls run on the current stream of their device.
class Stream {
 public:
  /// Wraps an existing cudaStream_t; `owner`, when given, destroys it with the last copy.
  Stream(void* handle, int device, std::shared_ptr<void> owner = {})
      : handle_(handle), device_(device), owner_(std::move(owner)) {}
  /// A new stream on `device` (-1: current) that does not synchronise with the legacy
  /// default stream; priority as in cudaStreamCreateWithPriority (lower is higher).
  static Stream create(int device = -1, int priority = 0);
  /// The device's default (null) stream.
  static Stream default_stream(int device = -1);

  void* handle() const { return handle_; }  // cudaStream_t
  int device() const { return device_; }
  /// True when all queued work has finished.
  bool query() const;
  void synchronize() const;
  bool operator==(const Stream& other) const { return handle_ == other.handle_ && device_ == other.device_; }

 private:
  void* handle_ = nullptr;
  int device_ = 0;
  std::shared_ptr<void> owner_;
};

/// The stream Kiln's work on `device` (-1: current) goes to from this thread.
Stream current_stream(int device = -1);
/// Makes `stream` current for its device on this thread.
void set_current_stream(const Stream& stream);

/// Makes `stream` current (and its device current) for its lifetime, then restores both.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  std::shared_ptr<Stream> previous_;
  int previous_device_;
};

/// A CUDA event: a marker in a stream, to wait on or time against.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  /// Marks the point reached so far by `stream` (default: the current stream).
  void record();
  void record(const Stream& stream);
  /// Makes `stream` wait (on the device, not the host) until this event has happened.
  void block(const Stream& stream) const;
  bool query() const;
  void synchronize() const;
  /// Milliseconds from this event to `end` (both recorded, timing enabled).
  float elapsed_time(const Event& end) const;
  void* handle() const { return handle_.get(); }

 private:
  std::shared_ptr<void> handle_;
  bool timing_;
};

// Device memory: the caching allocator (Note [Caching allocator]) of each device.
Allocator* device_allocator(int device);
MemoryStats memory_stats(int device = -1);
std::int64_t memory_allocated(int device = -1);
std::int64_t max_memory_allocated(int device = -1);
std::int64_t memory_reserved(int device = -1);
std::int64_t max_memory_reserved(int device = -1);
void reset_peak_memory_stats(int device = -1);
/// (free, total) bytes of the device as the driver reports them (torch.cuda.mem_get_info).
std::pair<std::size_t, std::size_t> mem_get_info(int device = -1);
/// PyTorch's torch.cuda.memory_summary(), in C++.
std::string memory_summary(int device = -1);
/// Returns every wholly free cached segment to the driver (all devices).
void empty_cache();

/// Page-locked host memory for asynchronous copies, cached and fenced: a freed block is
/// reused only after every copy queued from it has finished.
Allocator* host_allocator();
/// Tells the host allocator that `stream` reads or writes the pinned block holding `ptr`
/// (done by copy_bytes for non_blocking copies); a no-op for other pointers.
void record_host_use(const void* ptr, const Stream& stream);

/// Copies `nbytes` between any two of host (pageable or pinned) and device memory on the
/// current stream; synchronous unless `non_blocking` and the host side is pinned.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t nbytes, bool non_blocking);

/// TF32 tensor cores for Float32 matmul (off by default, as in PyTorch >= 1.12).
void set_allow_tf32(bool allow);
bool allow_tf32();

/// Fills the CUDA slots of the kernel tables (does nothing in the stub).
void register_kernels(BackendKernels& table);

}  // namespace kiln::cuda
