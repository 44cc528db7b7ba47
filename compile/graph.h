// compile/graph.h — a captured step as plain data: its nodes in the order they ran (kernel
// calls, regions that replay by running their own code, and the gradients autograd bound to
// leaves), the step's own input buffers and the tensors it returned. It prints readably, as
// torch.fx's graphs do, and exports to DOT; passes (compile/passes/) rewrite it; run() replays
// it. See Note [Capturing a step] in compile/capture.h.
//
//   const compiler::Graph& g = step.graph();
//   std::cout << g.print();      // %3: Float32[128, 32, 28, 28] = conv2d.forward(%in0, conv1.weight, ...)
//   std::ofstream("step.dot") << g.to_dot();
//
// Read next: compile/capture.h (how a graph is recorded), compile/passes.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compile/kernel_call.h"
#include "compile/lent_outputs.h"
#include "compile/scratch.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace kiln::compiler {

/// One step of a graph.
struct Node {
  enum class Kind : std::uint8_t {
    Kernel,     // `call` runs a kernel
    Region,     // `replay` runs the region's own code (an optimizer's step, ...)
    BindGrad,   // `leaf`'s .grad becomes `grad`, as autograd's AccumulateGrad did
  };
  Kind kind = Kind::Kernel;
  std::unique_ptr<KernelCall> call;        // Kernel
  std::string region;                      // Region: its name ("optimizer.step")
  std::function<void()> replay;            // Region
  std::vector<Tensor> reads;               // Region: step tensors it reads besides its own state
  Tensor leaf, grad;                       // BindGrad
  std::string made_by;                     // the pass that made this node ("" when captured)
  /// A kernel seen keeping memory it took from the replay's scratch (Note [Kernels' own memory
  /// in a replay]): it allocates as it would eagerly.
  mutable bool keeps_scratch = false;

  /// Replays this node.
  void run() const;
};

/// The arena a memory plan placed the step's temporaries in (Note [One arena per step]).
struct ArenaPlan {
  std::shared_ptr<Storage> arena;
  std::int64_t bytes = 0;          // the arena's size
  std::int64_t temporaries = 0;    // storages placed in it
  std::int64_t temporary_bytes = 0;  // their sizes summed: what eager execution allocates
};

class Graph {
 public:
  Graph() = default;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  /// Set by the memory pass; holds the memory that temporaries' storages borrow (declared
  /// first, so it goes last).
  ArenaPlan memory;
  std::vector<Node> nodes;
  /// Buffers the step's inputs are copied into before each replay (the step ran on them).
  std::vector<Tensor> inputs;
  /// The inputs (by index) the step writes in place: copied back into the caller's tensors
  /// after each replay, since the eager step writes the caller's.
  std::vector<std::size_t> written_inputs;
  /// An input that requires grad: while the step runs its buffer's .grad is `held`, the
  /// graph's copy of the caller's .grad (undefined when the caller's was empty at the capture,
  /// so that the step binds one); after it, the caller's .grad takes what the step left there
  /// (Note [A step's inputs]).
  struct GradInput {
    std::size_t input = 0;
    Tensor held;
  };
  std::vector<GradInput> grad_inputs;
  /// What the step returned; a replay writes into them and lends them (Note [What a replay
  /// returns]).
  std::vector<Tensor> outputs;
  /// Values the step computes from constants alone, made once by the capture and read by every
  /// replay (Note [Values computed once]).
  std::vector<Tensor> constants;

  /// Copies `values` into the input buffers, runs every node in order, copies the inputs the
  /// step wrote back into `values`, and returns the step's results, lent.
  std::vector<Tensor> run(const std::vector<Tensor>& values) const;
  /// What the capturing call returns in place of `results`, the eager ones, which lie over the
  /// graph's buffers: copies of those a replay lends, so that no replay overwrites them.
  std::vector<Tensor> capture_results(const std::vector<Tensor>& results) const;
  /// The block kernels' own temporaries come from during a replay (0 before the first).
  std::size_t scratch_bytes() const;

  std::size_t count(Node::Kind kind) const;
  std::size_t count(KernelFamily family) const;

  /// One line per node, torch.fx style: `%3: Float32[128, 32, 28, 28] = conv2d.forward(%in0,
  /// conv1.weight, conv1.bias) {k3x3 s1 p1, 1}`. Values are named by storage: inputs %inN,
  /// parameters by their module names, outputs %outN, the rest %N in order of first write.
  std::string print() const;
  /// The same as a Graphviz digraph: kernels as boxes, regions as octagons, values as edges.
  std::string to_dot() const;

 private:
  /// Made at the first use, once the passes have shaped the graph.
  LentOutputs& lent() const;
  /// What a replay hands out: the outputs, then the gradient each of grad_inputs is bound to
  /// (undefined where the step binds none and adds to the caller's).
  const std::vector<Tensor>& handed() const;

  mutable std::vector<Tensor> handed_;

  mutable std::unique_ptr<Scratch> scratch_;
  mutable std::unique_ptr<LentOutputs> lent_;
};

}  // namespace kiln::compiler
