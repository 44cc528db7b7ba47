// autograd/engine.h — the backward pass. See Note [Engine ordering].
//
//   auto loss = (w * x).sum();
//   loss.backward();                                   // accumulates into w.grad()
//   auto g = kiln::autograd::grad({loss2}, {w});       // returns d loss2 / d w instead
//
// Read next: autograd/gradcheck.h, autograd/graph.h.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace kiln::autograd {

// Note [Engine ordering]
// ~~~~~~~~~~~~~~~~~~~~~~
// backward() is a topological walk of the graph from the roots, written as loops (no
// recursion, so a 100,000-op chain neither overflows nor slows down):
//  1. Dependencies: an iterative DFS from the roots counts, for every reachable node, how many
//     edges point at it.
//  2. Ready queue: a node runs once all of its consumers have sent their gradient. Among ready
//     nodes, the most recently created runs first (PyTorch's order); AccumulateGrad nodes
//     run as soon as they are ready.
//  3. Input buffers: gradients arriving at the same output from several consumers (a tensor
//     used twice) are summed before the node runs.
//  4. Each gradient is checked against the shape and dtype of the tensor it belongs to (and
//     summed down if it was broadcast), then the node's tensor hooks run, then the node.
//  5. Without retain_graph, a node's saved tensors are freed right after it runs.
// With create_graph the nodes run with grad mode on, so the gradients they produce have
// their own history (higher-order derivatives).
// grad() makes the same walk with two differences (engine.cpp's WalkPolicy): only the nodes
// on a path to the inputs it was asked about run, and it copies each input's gradient out as
// the walk reaches it, stopping at leaves, so no .grad is written.

/// Computes gradients of `outputs` (seeded with `grad_outputs`, or ones for scalars) and
/// accumulates them into the leaves' `.grad`.
void backward(const TensorList& outputs, const TensorList& grad_outputs = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

/// Returns d(outputs)/d(inputs) without touching any `.grad`. With allow_unused, an input
/// that the outputs do not depend on gets an undefined Tensor instead of an error.
TensorList grad(const TensorList& outputs, const TensorList& inputs,
                const TensorList& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false, bool allow_unused = false);

}  // namespace kiln::autograd
