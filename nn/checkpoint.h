// nn/checkpoint.h — activation checkpointing (torch.utils.checkpoint, non-reentrant): trade
// compute for memory by keeping only a region's inputs and recomputing what its ops saved for
// backward when backward needs it. See Note [Activation checkpointing].
//
//   Tensor h = x;
//   for (const auto& layer : layers)                        // keep 2 tensors per layer, not ~20
//     h = nn::checkpoint([layer](const Tensor& in, const Tensor& m) { return (*layer)(in, m); }, h, mask);
//   Tensor y = nn::checkpoint_sequential(*seq, /*segments=*/2, x);
//
// fn runs again during backward, after the code that called checkpoint has returned: it must
// own what it uses (capture modules by shared_ptr or value, pass tensors as inputs), never
// capture the caller's locals by reference.
//
// Not to be confused with checkpoint/, which saves and resumes training state.
// Read next: autograd/saved_tensors_hooks.h, nn/checkpoint.cpp.
#pragma once

#include <functional>
#include <type_traits>

#include "nn/containers.h"

namespace kiln::nn {

// Note [Activation checkpointing]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// checkpoint(fn, inputs) runs fn once, recording the graph as usual, but under saved tensors
// hooks (autograd/saved_tensors_hooks.h) whose pack keeps only the tensor's position in the
// order of saving. So the graph is the same as without checkpointing, its nodes just hold no
// activations: each dies as soon as forward stops using it. The first time backward unpacks one
// of them, fn runs again on the same inputs with grad mode on, under hooks that keep every
// saved tensor in order; the n-th tensor saved then is the n-th one saved the first time. This
// is PyTorch's non-reentrant checkpoint (use_reentrant=False), and it inherits its properties:
//  - gradients are those of the plain run bit for bit: the same graph runs the same formulas on
//    the same values, since the recomputation replays fn exactly;
//  - the random generators are set back to their state at the first run for the
//    recomputation (and restored afterwards), so dropout draws the same mask
//    (preserve_rng_state): the CPU generator always, the CUDA one when an input is on CUDA;
//  - autocast is recomputed in the state the first run had;
//  - parameters used inside fn get their gradients through the ordinary graph: no input list
//    needs to name them;
//  - under no_grad, checkpoint just calls fn;
//  - double backward (autograd::grad with create_graph) works: see the Note below.
// The cost is one more forward of fn per backward. What stays alive from each region is its
// inputs (kept for the recomputation) and its outputs; the recomputed tensors live until
// backward has used them.

// Note [Double backward through a checkpoint]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A first-order backward needs the recomputed values only, so the recomputation runs on new
// leaves over the inputs' memory and keeps detached tensors: nothing of its graph survives it.
// Under create_graph the gradient formulas are themselves differentiated, through the saved
// tensors they read; detached ones would silently drop those terms (d/dx of x * x would come
// out as x instead of 2x). So a backward with create_graph recomputes on the inputs themselves
// and keeps the recomputed tensors with their graph, which leads back to the inputs as the
// first run's did: the second-order gradients are the plain run's. The recomputation's own
// nodes then keep their saved tensors as any node does (its hooks hold no list of them: that
// list, reaching tensors made after a node, would make a cycle through the node). A backward
// with create_graph after a first-order one recomputes again, with the graph.

// Note [A checkpoint in a compiled step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A compiled step (compile/compile.h) records a checkpointed region as what it is in kernels:
// fn's forward, then in the backward, where the first unpack asked for it, fn's forward again,
// then the backward's kernels reading the recomputed tensors. The hooks' bookkeeping (which
// saved tensor is which) chose those tensors once, at the capture, and a replay refills them in
// the same order, so the hooks mark themselves as made by ops. What is not a kernel is the
// generators' state: it is taken at the first run, set for the recomputation and put back
// after, each a region (capture::Region), so every replay takes and sets the state of its own
// step and dropout draws the same mask twice as eagerly. The arena's plan sees a checkpointed
// activation die at the end of the forward and the recomputed one live from the recomputation
// on, so the compiled step keeps checkpointing's saving.

using CheckpointFunction = std::function<TensorList(const TensorList& inputs)>;

/// Runs `fn(inputs)` without keeping what its ops save for backward, and recomputes it in
/// backward. See Note [Activation checkpointing].
TensorList checkpoint(const CheckpointFunction& fn, const TensorList& inputs, bool preserve_rng_state = true);

/// The tensor form: nn::checkpoint([&](const Tensor& x, const Tensor& m) { return block(x, m); }, x, m).
template <class Fn, class... Inputs>
  requires(std::is_convertible_v<Inputs, const Tensor&> && ...) &&
          std::is_convertible_v<std::invoke_result_t<Fn&, const Inputs&...>, Tensor>
Tensor checkpoint(Fn fn, const Inputs&... inputs) {
  const TensorList out = checkpoint(
      [fn = std::move(fn)](const TensorList& args) {
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
          return TensorList{Tensor(fn(args[I]...))};
        }(std::index_sequence_for<Inputs...>{});
      },
      TensorList{Tensor(inputs)...});
  return out[0];
}

/// torch.utils.checkpoint.checkpoint_sequential: `sequential`'s modules split into `segments`
/// runs of len / segments modules; each run but the last is checkpointed (the last one's
/// activations are needed at once by backward anyway).
Tensor checkpoint_sequential(Sequential& sequential, std::int64_t segments, const Tensor& input,
                             bool preserve_rng_state = true);

}  // namespace kiln::nn
