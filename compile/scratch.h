// compile/scratch.h — the memory a replayed step's kernels take for themselves: oneDNN's
// reorder buffers and scratchpads, a GEMM's packing space. Eager execution asks the allocator
// for them at every call; a replay serves them from one block, reused by every kernel in turn,
// so that a steady-state step makes no allocator request at all. See Note [Kernels' own
// memory in a replay].
// Read next: compile/graph.h (Graph::run installs it around each kernel).
#pragma once

#include <atomic>
#include <cstddef>

#include "core/capture_hooks.h"

namespace kiln::compiler {

// Note [Kernels' own memory in a replay]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Temporaries a kernel allocates inside itself die before it returns, so one block can serve
// every kernel of the step in turn: each kernel bump-allocates from its start. The block's
// size is learned: a request that does not fit goes to the allocator as before and the block
// grows to the largest amount one kernel needed, once, after that replay. A kernel that keeps
// memory beyond its call (a cache of its own) would be overwritten by the next kernel, so the
// block counts what is still out when a kernel returns: the block is then given up to whoever
// holds it (it lives until they free it), a new one serves the next kernels, and that kernel is
// left to the allocator from then on.

class Scratch final : public capture::ScratchSource {
 public:
  Scratch() = default;
  ~Scratch() override;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  DataPtr allocate(std::size_t nbytes) override;
  /// Brackets one kernel: install(), run it, then release() says whether everything it took
  /// from here came back (false: it kept some, see the Note).
  void install();
  bool release();
  /// After a replay: grows the block if a kernel needed more than it holds.
  void fit();
  std::size_t capacity() const;

 private:
  struct Block {
    char* data = nullptr;
    std::size_t bytes = 0;
    std::atomic<long> references{1};  // the Scratch's own, plus one per allocation still out
  };
  static void free_one(void* block, void* data);
  static void drop(Block* block);

  Block* block_ = nullptr;
  std::size_t used_ = 0, overflow_ = 0, needed_ = 0;
  capture::ScratchSource* previous_ = nullptr;
};

}  // namespace kiln::compiler
