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
