// compile/input_buffers.h — the graph's own copies of a step's inputs: which arguments share
// memory, and how the gradient of an input that requires grad reaches the caller's tensor.
// See Note [A step's inputs]. Read next: compile/capture.cpp (Capture::run makes the buffers),
// compile/graph.cpp (Graph::run fills them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace kiln::compiler {

class Graph;

// Note [A step's inputs]
// ~~~~~~~~~~~~~~~~~~~~~~
// A step is captured on buffers of its own, which every replay refills from the caller's
// tensors, and what the step writes in place is copied back. Three things the caller's tensors
// carry beyond their values have to survive that:
//  - Shared memory. The same tensor passed as two arguments, or two overlapping views of one
//    tensor: eagerly a write through one is read through the other. So the buffers share
//    memory as the arguments do: one buffer for the same tensor, and views of one copy of
//    the span the arguments cover for views that overlap. Which argument shares memory with
//    which, and where, is part of the guard (torch.compile guards on duplicate inputs too).
//    Arguments of different dtypes over one storage, or overlapping leaves that each require
//    grad, keep buffers of their own.
//  - Gradients. Eagerly the backward binds an input leaf's first gradient to its .grad and
//    adds later ones to it. The buffer stands in for the leaf, and whether the caller's .grad
//    is empty is part of the guard: a graph captured with an empty one binds a gradient
//    (Note [A gradient bound or added to]), which then reaches the caller's tensor, lent as a
//    result is (Note [What a replay returns]); a graph captured with one holds a copy of it
//    on the buffer, refilled from the caller's before each replay and copied back into it
//    after, so the step adds to it and reads the sum as eagerly, and the caller's .grad stays
//    the same tensor. So an adversarial-example loop (a new batch made to require grad each
//    step) replays one graph, and one that accumulates over calls replays two.
//  - Memory the step also reaches directly. A buffer is a copy: a parameter passed as an
//    argument and also read through its module, or a tensor a closure captured and also
//    passed, would be two tensors in a replay where eagerly it is one (the optimizer's update
//    unseen through the argument, the two paths' gradients bound to different leaves). So
//    such a call runs eagerly, on the caller's tensors. A module's parameter passed itself is
//    known by its name before anything runs; an argument over memory that a graph of the
//    step reads from outside (Note [Tensors a step reads from outside]: a parameter's
//    detach(), a closure's tensor) is found before a replay. Only a first capture meets other
//    memory reached both ways as the step runs (a kernel, a region or the backward reaching
//    the argument's own storage); it fails, and since that call already computed on the
//    copy, its warning says so. Later calls over that memory run eagerly; calls of the same
//    kind over other memory capture anew.
// What a buffer cannot stand in for runs eagerly, said once with the argument's index: an
// input that requires grad and is not a leaf (eagerly its backward goes on into the graph
// that made it, outside the step), a leaf with hooks on its gradient (they are the caller's
// tensor's, and a replay would not run them), and memory the step also reaches directly.

/// The module name of a registered parameter ("encoder.norm.weight"), "" for any other tensor;
/// it lives as long as the tensor's autograd metadata.
std::string_view parameter_name(const Tensor& t);

/// Whether `leaf` has hooks on its gradient (register_hook, register_post_accumulate_grad_hook).
bool has_grad_hooks(const Tensor& leaf);

/// Why `inputs` cannot be captured as buffers ("" when they can): a module's parameter, an
/// argument whose backward leaves the step, or whose gradient hooks a replay would skip.
std::string inputs_not_replayable(const std::vector<Tensor>& inputs);

/// For each input, the first earlier input over the same storage (-1 when none), and the
/// distance in bytes from its start to this one's.
struct SharedMemory {
  int with = -1;
  std::int64_t byte_offset = 0;
  bool same_tensor = false;  // the very same tensor, not only the same view
  bool operator==(const SharedMemory&) const = default;
};
std::vector<SharedMemory> shared_memory(const std::vector<Tensor>& inputs);

/// The graph's buffers for `inputs`: copies with the inputs' values, sharing memory as they
/// do; a leaf's buffer where the input requires grad.
std::vector<Tensor> make_input_buffers(const std::vector<Tensor>& inputs);

/// Before the step runs: the .grad of each input that requires grad, on its buffer (the
/// graph's copy of the caller's, refilled from it, or none).
void hold_callers_grads(const Graph& g, const std::vector<Tensor>& values);
/// After it: what the step left in each buffer's .grad becomes the caller's (`bound[k]`, as
/// handed to the caller, where the step bound Graph::grad_inputs[k] a gradient anew), and the
/// buffers' .grad is emptied.
void hand_grads_to_callers(const Graph& g, const std::vector<Tensor>& values, const std::vector<Tensor>& bound);

}  // namespace kiln::compiler
