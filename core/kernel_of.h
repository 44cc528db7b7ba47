// core/kernel_of.h — KernelOf: a kernel declared from the type of the table slot it fills, so
// each kernel signature is written once, in core/kernels.h, and every backend's declarations
// (core/cpu/cpu_kernels.h, core/onednn/kernels.h, core/cuda/cuda_kernels.h) follow it:
//
//   KernelOf<WhereKernel> where_kernel;   // void where_kernel(const Tensor& out, ...);
//
// A definition whose parameters drift from the slot no longer matches the declaration, and the
// registration list fails to compile.
// Read next: core/kernels.h.
#pragma once

#include <type_traits>

namespace kiln {

/// The function type of a kernel table slot (a function pointer type).
template <class Slot>
using KernelOf = std::remove_pointer_t<Slot>;

}  // namespace kiln
