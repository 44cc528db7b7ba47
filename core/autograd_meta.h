// core/autograd_meta.h — the mutable autograd *state* of a tensor, as opposed to its terms
// (requires_grad, grad_fn), which are fixed in TensorImpl. Created on first use, so tensors
// that never meet autograd pay one null pointer.
// Read next: autograd/accumulate_grad.h (who writes `grad`), autograd/engine.h.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln {

struct AutogradMeta {
  /// The accumulated gradient of a leaf (or of a non-leaf that called retain_grad()).
  Tensor grad;
  bool retains_grad = false;
  /// The leaf's AccumulateGrad node, shared by every op that uses this leaf in one graph;
  /// weak so that the node dies with the graph.
  std::weak_ptr<autograd::Node> grad_accumulator;
  /// Gradient hooks of a leaf, run by AccumulateGrad before accumulating (a non-leaf's hooks
  /// live on its grad_fn, keyed by output_nr).
  std::vector<std::pair<int, GradHook>> hooks;
  /// Run by AccumulateGrad after accumulating (a leaf's only).
  std::vector<std::pair<int, PostAccumulateGradHook>> post_accumulate_grad_hooks;
  int next_hook_id = 0;
  /// A name for graphs and messages, e.g. "fc1.weight" (set when a module registers it).
  std::string name;
  /// Set when nn::Module::to() replaced this parameter with a tensor on another device or of
  /// another dtype: holders of the old tensor (an optimizer) follow it. See Note [Moving
  /// parameters] in nn/module.cpp.
  Tensor successor;
  /// Guards `grad` and `hooks`: DataLoader workers and the engine may touch them concurrently.
  std::mutex mutex;
};

}  // namespace kiln
