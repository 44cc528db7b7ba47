// autograd/graph.h — seeing the graph: export it as Graphviz DOT, and ask a tensor why it
// has (or has no) gradient.
//
//   std::cout << kiln::autograd::to_dot(loss);      // dot -Tpng > graph.png
//   std::cout << kiln::autograd::explain(x);        // "a leaf created by randn at ... "
//
// Read next: examples/walkthrough.cpp.
#pragma once

#include <string>

#include "core/tensor.h"

namespace kiln::autograd {

/// The backward graph reachable from `roots` as a Graphviz DOT digraph: one box per node
/// named like PyTorch's (AddmmBackward0), leaves with their parameter names when known, and
/// the shapes and dtypes of tensors and saved tensors.
std::string to_dot(const TensorList& roots);
inline std::string to_dot(const Tensor& root) { return to_dot(TensorList{root}); }

/// A short explanation of why `t` has or has no gradient ("created under NoGradGuard",
/// "output of detach()", "integer dtype", "not a leaf; call retain_grad() before backward").
std::string explain(const Tensor& t);

}  // namespace kiln::autograd
