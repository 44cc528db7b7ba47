// autograd/accumulate_grad.cpp — accumulating into leaves.
#include "autograd/accumulate_grad.h"

#include <mutex>

#include "core/autograd_meta.h"
#include "core/capture_hooks.h"
#include "core/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"

namespace kiln::autograd {

AccumulateGrad::AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {
  add_output(leaf_);
  run_first();
}

std::shared_ptr<Node> AccumulateGrad::for_leaf(const Tensor& leaf) {
  AutogradMeta& meta = leaf.impl()->autograd_meta();
  std::lock_guard<std::mutex> lock(meta.mutex);
  if (auto existing = meta.grad_accumulator.lock()) return existing;
  auto node = std::make_shared<AccumulateGrad>(leaf);
  meta.grad_accumulator = node;
  return node;
}

namespace {

// Note [A gradient bound or added to]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// AccumulateGrad makes a leaf's first gradient its .grad and adds later ones to it. A captured
// step records whichever it did: a replay of a step that bound the gradient binds it again,
// one that added to the .grad adds to the same tensor. So what the .grad held when the step
// reached it is a condition of the graph (compile/capture.h): gradient accumulation, a step
// without zero_grad called k times before the optimizer's step, gets a graph that binds for
// the first call after zero_grad and one that adds for the others, where a single graph would
// overwrite what the earlier calls accumulated. A step that sets the .grad to none itself
// (zero_grad inside it) says so (capture::grad_unbound), and its graph holds whatever the
// .grad held when it was called.
void depend_on_grad(const Tensor& leaf, const Tensor& grad) {
  if (capture::observer() == nullptr) return;
  std::weak_ptr<Storage> storage;
  if (grad.defined()) storage = grad.impl()->storage();
  capture::depends_on(leaf.impl(), [leaf = std::weak_ptr<TensorImpl>(leaf.impl_ptr()), bound = grad.defined(), storage] {
    const std::shared_ptr<TensorImpl> now = leaf.lock();
    if (now == nullptr) return false;
    const Tensor& g = now->autograd_meta().grad;
    return g.defined() == bound && (!bound || g.impl()->storage() == storage.lock());
  });
}

}  // namespace

void AccumulateGrad::accumulate(const Tensor& leaf, Tensor new_grad, bool create_graph) {
  AutogradMeta& meta = leaf.impl()->autograd_meta();
  std::vector<GradHook> hooks;
  {
    std::lock_guard<std::mutex> lock(meta.mutex);
    for (const auto& [id, fn] : meta.hooks) hooks.push_back(fn);
  }
  for (const GradHook& h : hooks) {
    Tensor replaced = h(new_grad);
    if (replaced.defined()) new_grad = std::move(replaced);
  }
  std::lock_guard<std::mutex> lock(meta.mutex);
  Tensor& grad = meta.grad;
  depend_on_grad(leaf, grad);
  if (!grad.defined()) {
    if (create_graph) {
      grad = new_grad;
    } else if (new_grad.impl_ptr().use_count() == 1 && !new_grad.grad_fn() && new_grad.is_contiguous()) {
      grad = std::move(new_grad);  // nobody else holds it: take it without a copy
    } else {
      grad = ops::clone(new_grad);
    }
    capture::grad_bound(leaf, grad);  // a captured step binds it again at each replay
  } else if (create_graph || is_grad_enabled()) {
    grad = grad + new_grad;  // recorded: the accumulated gradient stays differentiable
    capture::grad_bound(leaf, grad);
  } else {
    ops::binary_(BinaryOp::Add, grad, new_grad);
  }
}

TensorList AccumulateGrad::apply(TensorList&& grads) {
  if (!grads[0].defined()) return {};
  accumulate(leaf_, std::move(grads[0]), is_grad_enabled());
  AutogradMeta& meta = leaf_.impl()->autograd_meta();
  std::vector<PostAccumulateGradHook> hooks;
  {
    std::lock_guard<std::mutex> lock(meta.mutex);
    for (const auto& [id, fn] : meta.post_accumulate_grad_hooks) hooks.push_back(fn);
  }
  for (const PostAccumulateGradHook& h : hooks) h(leaf_);
  return {};
}

}  // namespace kiln::autograd
