// autograd/node.h — a node of the backward graph. Every op output that requires grad was
// created with a grad_fn: a Node that knows how to turn the gradient of its outputs into
// gradients for its inputs, and (through its next edges) where to send them.
//
//   y = x.exp()        // y.grad_fn() is an ExpBackward0 node; its one next edge points at
//                      // x's grad_fn, or at x's AccumulateGrad node if x is a leaf.
//
// Nodes are destroyed iteratively, so a graph of 100,000 ops does not overflow the stack when
// its last tensor dies. See Note [Engine ordering] in autograd/engine.h.
// Read next: autograd/saved_variable.h, autograd/function.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/small_vector.h"
#include "core/tensor.h"

namespace kiln::autograd {

class Node;

/// Where a gradient goes: input slot `input_nr` of `function` (a null function means the
/// input did not require grad).
struct Edge {
  std::shared_ptr<Node> function;
  std::uint32_t input_nr = 0;
  bool is_valid() const { return function != nullptr; }
};

/// What a gradient for one of a node's outputs must look like (checked by the engine, and
/// used to fill in zeros when an output received no gradient).
struct OutputMeta {
  Shape sizes;
  DType dtype = DType::Float32;
  Device device = kCPU;
};

/// Most ops take one to three tensors and return one: kept inline in the node, recording an
/// op allocates nothing for them.
using EdgeList = SmallVector<Edge, 3>;
using OutputMetaList = SmallVector<OutputMeta, 1>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// Gradients of this node's inputs, one per next edge, from the gradients of its outputs
  /// (one per output; undefined where an output got none).
  virtual TensorList apply(TensorList&& grads) = 0;
  /// PyTorch's name for this node ("MulBackward0").
  virtual const char* name() const = 0;
  /// Frees saved tensors (after a backward without retain_graph).
  virtual void release_variables() {}
  /// Descriptions of the saved tensors, for graphs and explanations.
  virtual std::vector<std::string> saved_summary() const { return {}; }

  const EdgeList& next_edges() const { return next_edges_; }
  void add_next_edge(Edge edge) { next_edges_.push_back(std::move(edge)); }
  std::uint32_t num_outputs() const { return static_cast<std::uint32_t>(outputs_.size()); }
  const OutputMetaList& output_meta() const { return outputs_; }
  std::uint32_t add_output(const Tensor& t) {
    outputs_.push_back({t.sizes().vec(), t.dtype(), t.device()});
    return num_outputs() - 1;
  }
  /// Creation order: the engine runs later-created nodes first among those ready.
  std::uint64_t sequence_nr() const { return sequence_nr_; }

  /// Hooks on the gradient flowing into output `output_nr` (a non-leaf tensor's hooks).
  int add_pre_hook(std::uint32_t output_nr, GradHook hook);
  void remove_pre_hook(int id);
  /// Runs the hooks registered for `output_nr` over `grad` (a hook may replace it).
  void run_pre_hooks(std::uint32_t output_nr, Tensor& grad) const;
  bool has_pre_hooks() const { return !pre_hooks_.empty(); }

  /// Where the forward op was called (recorded only under DetectAnomalyGuard).
  const std::string& creation_trace() const { return creation_trace_; }
  void set_creation_trace(std::string trace) { creation_trace_ = std::move(trace); }

 protected:
  /// AccumulateGrad runs as soon as it is ready (PyTorch gives it the largest number).
  void run_first() { sequence_nr_ = UINT64_MAX; }

  EdgeList next_edges_;
  OutputMetaList outputs_;

 private:
  struct PreHook {
    int id;
    std::uint32_t output_nr;
    GradHook fn;
  };
  std::uint64_t sequence_nr_;
  std::vector<PreHook> pre_hooks_;
  int next_hook_id_ = 0;
  std::string creation_trace_;
};

/// The sequence number the next node created on this thread will take: a profiler reads it
/// before an op runs to tell the node that op built from older ones (Note [Profiler hook points]).
std::uint64_t peek_sequence_nr();

/// The edge a gradient for `t` should follow: its grad_fn (at its output_nr), or its leaf
/// accumulator. Invalid when `t` does not require grad.
Edge gradient_edge(const Tensor& t);

}  // namespace kiln::autograd
