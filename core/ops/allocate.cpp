// core/ops/allocate.cpp — output allocation and views for raw ops.
#include "core/ops/allocate.h"

namespace kiln::ops {

Tensor empty_output(IntArrayRef sizes, DType dtype, Device device, const char* op) {
  auto storage = Storage::allocate_for(sizes, dtype, device, false, {MemoryOrigin::Allocated, op, {}});
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), sizes.vec(),
                                             contiguous_strides(sizes), 0, dtype, AutogradTerms{},
                                             Provenance{TensorOrigin::OpOutput, op, {}}));
}

Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides,
                 std::int64_t storage_offset, const char* api) {
  return Tensor(std::make_shared<TensorImpl>(base.impl()->storage(), sizes.vec(), strides.vec(),
                                             storage_offset, base.dtype(), AutogradTerms{},
                                             Provenance{TensorOrigin::View, api, {}}));
}

}  // namespace kiln::ops
