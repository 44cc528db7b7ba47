// core/print.h — the text of a tensor as PyTorch prints it, without its history: the values,
// device, dtype and requires_grad. `std::cout << t` (declared in core/tensor.h) is defined by
// autograd (autograd/tensor_print.cpp), which adds `grad_fn=<MulBackward0>`: naming a backward
// node is autograd's, and core never calls it (Note [Layering] in core/tensor.h).
// Read next: autograd/tensor_print.cpp.
#pragma once

#include <ostream>

#include "core/tensor.h"

namespace kiln {

/// Writes `t` as `tensor([...], dtype=kiln.float64, ...)`; `grad_fn_name` (nullptr when `t` has
/// no grad_fn) is the name of its backward node.
void print_tensor(std::ostream& os, const Tensor& t, const char* grad_fn_name);

}  // namespace kiln
