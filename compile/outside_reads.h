// compile/outside_reads.h — the tensors a graph uses that live outside the step (a parameter,
// a module's buffer, a tensor the step's lambda captured), and the test that something outside
// the graph still holds each one. See Note [Tensors a step reads from outside].
// Read next: compile/compile.cpp (which drops a graph whose outside tensor was let go).
#pragma once

#include <cstddef>
#include <memory>
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

class OutsideReads {
 public:
  /// Notes the storages of `g` that something outside it holds now.
  explicit OutsideReads(const Graph& g);

  /// A description of the first noted tensor that nothing outside the graph holds any more
  /// ("Float32[3]"), or "" while all are held.
  std::string let_go() const;
  /// How many storages are noted.
  std::size_t size() const { return held_.size(); }

 private:
  std::vector<GraphHolds> held_;
};

}  // namespace kiln::compiler
