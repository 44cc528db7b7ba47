// compile/outside_reads.h — the tensors a graph uses that live outside the step (a parameter,
// a module's buffer, a tensor the step's lambda captured), and the test that something outside
// the graph still holds each one. See Note [Tensors a step reads from outside].
// Read next: compile/compile.cpp (which drops a graph whose outside tensor was let go).
#pragma once

#include <cstddef>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "compile/storage_uses.h"

namespace kiln::compiler {

// Note [Tensors a step reads from outside]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A graph holds the tensors its kernels were called with. Those the step made are refilled by
// every replay; those that live outside it (parameters, a BatchNorm's running statistics, a
// class-weight tensor or a batch the step's lambda captured by reference) are read where they
// lie, so new values written into them (an optimizer's update, copy_, load_state_dict) reach
// the replay. A new tensor put in their place does not: the graph holds the old one, and
// would go on reading it, silently (torch.compile guards on the identity of the tensors a
// function reads from its closure for the same reason). C++ lambdas are opaque, so the graph
// cannot see the variable; it can see the old tensor being let go. Once the capturing call
// has returned (its eager results and autograd graph gone), every storage of the graph that
// something outside it still holds is noted, but for gradients bound to leaves, which the
// graph binds itself, and its input buffers. A compiled step checks them before each replay:
// when one is held by nothing but the graph, the step must be reading another tensor now, so
// the graph is dropped and the call captures again, with a warning that says what to do
// instead (pass a tensor that changes as an argument, or write into it). A tensor replaced
// while something else still holds the old one goes unseen: the guard is the caller letting
// go, not the variable.
// The other way out is as silent: host code in the step that keeps a tensor the step made (a
// recurrent state assigned to a variable for the next call, `state = h_n.detach()`, a result
// pushed into a list) runs only in the capturing call. A replay writes the new values into
// the graph's buffer and the variable still names the tensor of the first call, or the buffer
// itself, which the next replay overwrites; a recurrent state read back from it starts each
// replay where the capture started (losses apart from the second call on). So a storage the
// step's ops allocated (outside regions, whose state is their own) that something outside the
// graph holds once the capturing call returned, other than a gradient bound to a leaf, makes
// the step run eagerly, with a warning to return the tensor instead and pass it back in.

class OutsideReads {
 public:
  /// Notes the storages of `g` that something outside it holds now; `made` is the memory the
  /// capture saw the step allocate (Capture::made).
  OutsideReads(const Graph& g, const std::vector<std::weak_ptr<Storage>>& made);

  /// A description of a tensor the step made that something outside the graph keeps
  /// ("Float32[2, 5], made by detach at ..."), or "" when there is none.
  const std::string& made_and_kept() const { return made_and_kept_; }

  /// A description of the first noted tensor that nothing outside the graph holds any more
  /// ("Float32[3]"), or "" while all are held.
  std::string let_go() const;
  /// Whether `storage` is one of the noted ones: memory the graph reads where it lies.
  bool reads(const Storage* storage) const { return storages_.contains(storage); }
  /// How many storages are noted.
  std::size_t size() const { return held_.size(); }

 private:
  std::vector<GraphHolds> held_;
  std::set<const Storage*> storages_;  // held_'s, to look up
  std::string made_and_kept_;
};

}  // namespace kiln::compiler
