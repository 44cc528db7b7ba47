// core/cuda/cuda.h — the CUDA backend as the rest of Kiln sees it. Two implementations sit
// behind these declarations: the real one (core/cuda/*.cu, built when nvcc is found) and a
// stub (core/cuda/stub.cpp) that reports "no CUDA" and throws clear errors. The build picks
// one, so no file outside core/cuda needs #ifdef. See Note [Layering] in core/tensor.h.
// Read next: core/cuda/stub.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
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

/// Caching allocator for device memory (throws when there is no device).
Allocator* device_allocator(int device);
/// Page-locked host memory for asynchronous copies (throws when CUDA is unavailable).
Allocator* host_allocator();

/// Copies `nbytes` between any two of host (pageable or pinned) and device memory on the
/// current stream; synchronous unless `non_blocking` and the host side is pinned.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t nbytes, bool non_blocking);

/// Fills the CUDA slots of the kernel tables (does nothing in the stub).
void register_kernels(BackendKernels& table);

}  // namespace kiln::cuda
