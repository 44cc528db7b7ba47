// core/messages.h — the canonical error texts, built in one place so that every op says the
// same thing in the same words. The first line is PyTorch's wording (so a search finds the
// explanation); where a tensor is to blame, a second line names it with its provenance
// ("argument 'input' was created by from_blob at loader.cpp:42").
// Read next: core/provenance.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/array_ref.h"
#include "core/device.h"
#include "core/dtype.h"

namespace kiln {
class Tensor;
}

namespace kiln::msg {

/// "argument 'input' was created by from_blob at loader.cpp:42".
std::string blame(const char* argument, const Tensor& t);

std::string undefined_tensor();
/// "expected scalar type Float but found Double".
std::string scalar_type(DType expected, DType found);
/// "Expected all tensors to be on the same device, but found at least two devices, cuda:0
/// and cpu!" plus the provenance of both tensors.
std::string same_device(const char* arg_a, const Tensor& a, const char* arg_b, const Tensor& b);
/// "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
std::string dim_out_of_range(std::int64_t dim, std::int64_t ndim);
/// "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1".
std::string broadcast_mismatch(std::int64_t size_a, std::int64_t size_b, std::int64_t dim);
/// "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)".
std::string mm_shapes(IntArrayRef a, IntArrayRef b);
/// "\"add_cpu\" not implemented for 'Half'".
std::string not_implemented_for(const char* kernel, DType dtype);
std::string requires_grad_dtype(DType dtype);
std::string cpu_out_of_memory(std::size_t bytes);
/// "shape '[2, 5]' is invalid for input of size 6".
std::string invalid_shape(IntArrayRef shape, std::int64_t numel);
std::string view_incompatible();
/// "index 5 is out of bounds for dimension 0 with size 3".
std::string index_out_of_bounds(std::int64_t index, std::int64_t dim, std::int64_t size);

}  // namespace kiln::msg
