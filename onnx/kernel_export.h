// onnx/kernel_export.h — one recorded kernel call (compile/kernel_call.h) written as ONNX
// nodes: conv2d.forward as Conv, bmm as MatMul, unary.relu as Relu, and so on. A kernel with no
// ONNX form (a backward kernel, an optimizer's update, a random fill) is a NotImplementedError
// naming it and the tensor it would have made. See Note [Exporting a captured forward].
// Read next: onnx/graph_builder.h.
#pragma once

#include "compile/kernel_call.h"
#include "onnx/graph_builder.h"

namespace kiln::onnx {

/// Adds the nodes that compute what `call` computed, reading and writing values through `graph`.
void export_kernel(const compiler::KernelCall& call, GraphBuilder& graph);

}  // namespace kiln::onnx
