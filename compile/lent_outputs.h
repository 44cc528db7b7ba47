// compile/lent_outputs.h — what a replay hands its caller: the graph's output buffers, lent,
// and copied out only when the caller still holds one as the next replay begins.
// See Note [What a replay returns]. Read next: compile/graph.h (Graph::run, its one user).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/storage.h"
#include "core/tensor.h"

namespace kiln::compiler {

class Graph;

// Note [What a replay returns]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A replay writes the step's results into the same buffers every time. Handing the caller the
// buffers themselves would let the next replay overwrite what the caller kept: a list of the
// losses of ten steps would read ten times the last one, silently (PyTorch's CUDA graphs share
// the hazard and raise an error when an overwritten output is read). Copying every result out
// would cost an allocation per step in the usual loop, which reads the loss and lets it go.
// So a replay lends. Each result the step makes anew (its buffer's first use in the graph
// writes the whole of it, or it is an input buffer, which every replay refills) reaches the
// caller over a storage of its own that borrows the buffer's bytes and keeps the buffer
// alive, should the graph go first. As the next replay begins, a loan that only the graph
// holds is lent again as it is; one the caller still holds, through the tensor or a view of
// it, gets bytes of its own, a copy of the buffer (Storage::set_data_ptr), before the replay
// overwrites the buffer. A kept result keeps the value it was returned with, as it does
// eagerly, and a loop that lets its loss go allocates nothing. A result that is state living
// on between steps (a parameter, a running statistic the step updates in place) is returned
// as it is, the live state, as the eager step returns it. The gradient a step binds to an
// input that requires grad reaches the caller's tensor as a loan too (Note [A step's inputs]).
// The capturing call returns the eager results over the same buffers, so it hands over copies
// of those a replay lends (Graph::capture_results).

class LentOutputs {
 public:
  /// Decides which of `handed`, tensors of `g` a replay hands its caller (its outputs, an
  /// input's gradient), are lent: those over a buffer the step makes anew.
  LentOutputs(const Graph& g, const std::vector<Tensor>& handed);

  /// Before a replay overwrites the buffers: every loan the caller still holds gets a copy of
  /// its bytes and leaves the graph.
  void settle();
  /// `handed` (the graph's, as given to the constructor) as the caller receives them.
  std::vector<Tensor> lend(const std::vector<Tensor>& handed);
  /// Whether handed tensor `i` is lent (and so copied when the capturing call returns it).
  bool lends(std::size_t i) const { return loan_of_[i] >= 0; }

 private:
  struct Loan {
    std::shared_ptr<Storage> buffer;  // the graph's
    std::shared_ptr<Storage> lent;    // borrows buffer's bytes; null once the caller kept it
    std::vector<std::size_t> outputs;  // the outputs over this buffer
  };
  std::vector<Loan> loans_;
  std::vector<int> loan_of_;      // per output: its loan, or -1 when it is returned as it is
  std::vector<Tensor> returned_;  // what the last replay returned
};

}  // namespace kiln::compiler
