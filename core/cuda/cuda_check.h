// core/cuda/cuda_check.h — turning CUDA, cuBLAS and cuDNN status codes into Kiln errors
// ("CUDA error: out of memory", PyTorch's wording), for the backend's host code.
// Read next: core/cuda/runtime.cpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <source_location>

namespace kiln {
class Tensor;
}

namespace kiln::cuda {

/// The index of the device `t` lives on (a "cuda" tensor without an index: the current one).
int device_of(const Tensor& t);

/// Throws a Kiln error for a failed CUDA runtime call; clears CUDA's sticky last error.
void check(cudaError_t status, const char* call, std::source_location where = std::source_location::current());

/// The cudaStream_t of the current stream on `device`.
cudaStream_t current_cuda_stream(int device);

/// The seed and the Philox counter offset for a draw of `counters` counters (advances it).
std::pair<std::uint64_t, std::uint64_t> philox_seed_and_offset(std::uint64_t counters);

}  // namespace kiln::cuda
