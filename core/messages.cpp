// core/messages.cpp — the canonical error texts (see core/messages.h).
#include "core/messages.h"

#include <sstream>

#include "core/tensor.h"

namespace kiln::msg {

std::string blame(const char* argument, const Tensor& t) {
  return detail::str_cat("argument '", argument, "' was ", t.describe());
}

std::string undefined_tensor() {
  return "Tensor is undefined (default-constructed or moved-from); create it with a factory "
         "such as kiln::zeros or kiln::tensor before using it";
}

std::string scalar_type(DType expected, DType found) {
  return detail::str_cat("expected scalar type ", scalar_type_name(expected), " but found ",
                         scalar_type_name(found));
}

std::string same_device(const char* arg_a, const Tensor& a, const char* arg_b, const Tensor& b) {
  return detail::str_cat(
      "Expected all tensors to be on the same device, but found at least two devices, ",
      a.device(), " and ", b.device(), "!\n", blame(arg_a, a), "\n", blame(arg_b, b));
}

std::string dim_out_of_range(std::int64_t dim, std::int64_t ndim) {
  const std::int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dims -1 and 0
  return detail::str_cat("Dimension out of range (expected to be in range of [", -n, ", ",
                         n - 1, "], but got ", dim, ")");
}

std::string broadcast_mismatch(std::int64_t size_a, std::int64_t size_b, std::int64_t dim) {
  return detail::str_cat("The size of tensor a (", size_a, ") must match the size of tensor b (",
                         size_b, ") at non-singleton dimension ", dim);
}

std::string mm_shapes(IntArrayRef a, IntArrayRef b) {
  return detail::str_cat("mat1 and mat2 shapes cannot be multiplied (", a[0], "x", a[1], " and ",
                         b[0], "x", b[1], ")");
}

std::string not_implemented_for(const char* kernel, DType dtype) {
  return detail::str_cat("\"", kernel, "\" not implemented for '", scalar_type_name(dtype), "'");
}

std::string requires_grad_dtype(DType dtype) {
  return detail::str_cat(
      "Only Tensors of floating point and complex dtype can require gradients (got ", dtype,
      "; create it with a floating dtype, or leave requires_grad false)");
}

std::string cpu_out_of_memory(std::size_t bytes) {
  return detail::str_cat("DefaultCPUAllocator: not enough memory: you tried to allocate ", bytes,
                         " bytes.");
}

std::string invalid_shape(IntArrayRef shape, std::int64_t numel) {
  return detail::str_cat("shape '", shape, "' is invalid for input of size ", numel);
}

std::string view_incompatible() {
  return "view size is not compatible with input tensor's size and stride (at least one "
         "dimension spans across two contiguous subspaces). Use .reshape(...) instead.";
}

std::string index_out_of_bounds(std::int64_t index, std::int64_t dim, std::int64_t size) {
  return detail::str_cat("index ", index, " is out of bounds for dimension ", dim, " with size ",
                         size);
}

}  // namespace kiln::msg
