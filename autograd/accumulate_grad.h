// autograd/accumulate_grad.h — the node at the end of every path: it adds the incoming
// gradient into a leaf's `.grad`. One AccumulateGrad per leaf is shared by every op that
// used the leaf (the leaf holds it weakly), so gradients from several uses meet here.
// Read next: autograd/engine.h.
#pragma once

#include "autograd/node.h"

namespace kiln::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf);

  /// The leaf's accumulator, created on first use.
  static std::shared_ptr<Node> for_leaf(const Tensor& leaf);

  TensorList apply(TensorList&& grads) override;
  const char* name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return leaf_; }

  /// Adds `new_grad` into `leaf`'s .grad: the first gradient is taken as is (or copied if
  /// someone else holds it), later ones are summed. With create_graph the sum is recorded,
  /// so the gradient itself can be differentiated.
  static void accumulate(const Tensor& leaf, Tensor new_grad, bool create_graph);

 private:
  Tensor leaf_;
};

}  // namespace kiln::autograd
