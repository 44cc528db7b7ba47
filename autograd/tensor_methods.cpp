// autograd/tensor_methods.cpp — the Tensor methods that belong to autograd: .grad,
// retain_grad, hooks, detach, as_leaf and requires_grad_. See Note [Layering] in core/tensor.h.
// Read next: autograd/engine.h.
#include <mutex>

#include "autograd/node.h"
#include "core/autograd_meta.h"
#include "core/capture_hooks.h"

namespace kiln {

namespace {
const Tensor& undefined_tensor() {
  static const Tensor undefined;
  return undefined;
}
}  // namespace

const Tensor& Tensor::grad() const {
  AutogradMeta* meta = checked().autograd_meta_if_exists();
  return meta ? meta->grad : undefined_tensor();
}

Tensor& Tensor::mutable_grad() const { return impl_->autograd_meta().grad; }

void Tensor::retain_grad() const {
  KILN_CHECK(requires_grad(), "can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf()) return;  // leaves keep .grad anyway
  AutogradMeta& meta = impl_->autograd_meta();
  if (meta.retains_grad) return;
  meta.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  grad_fn()->add_pre_hook(output_nr(), [weak](const Tensor& g) -> Tensor {
    if (auto impl = weak.lock()) {
      AutogradMeta& m = impl->autograd_meta();
      std::lock_guard<std::mutex> lock(m.mutex);
      // Kept out of the graph: the retained gradient is a value, like a leaf's.
      m.grad = m.grad.defined() ? m.grad + g.detach() : g.detach().clone();
    }
    return {};
  });
}

bool Tensor::retains_grad() const {
  const AutogradMeta* meta = checked().autograd_meta_if_exists();
  return meta != nullptr && meta->retains_grad;
}

namespace {

/// Adds `hook` to one of a leaf's hook lists (`list`, a member of AutogradMeta); the handle
/// removes it again, if the tensor still exists.
template <class Hook>
HookHandle add_leaf_hook(const std::shared_ptr<TensorImpl>& leaf,
                         std::vector<std::pair<int, Hook>> AutogradMeta::*list, Hook hook) {
  AutogradMeta& meta = leaf->autograd_meta();
  std::lock_guard<std::mutex> lock(meta.mutex);
  const int id = meta.next_hook_id++;
  (meta.*list).emplace_back(id, std::move(hook));
  // A step captured before would replay without the hook; one registered by the step being
  // captured is the step's own.
  if (capture::observer() == nullptr) capture::held_state_changed();
  std::weak_ptr<TensorImpl> weak = leaf;
  return HookHandle([weak, list, id] {
    if (auto impl = weak.lock()) {
      AutogradMeta& m = impl->autograd_meta();
      std::lock_guard<std::mutex> l(m.mutex);
      const bool removed = std::erase_if(m.*list, [id](const auto& h) { return h.first == id; }) > 0;
      if (removed && capture::observer() == nullptr) capture::held_state_changed();
    }
  });
}

}  // namespace

HookHandle Tensor::register_hook(GradHook hook) const {
  KILN_CHECK(requires_grad(), "cannot register a hook on a tensor that doesn't require gradient");
  if (!is_leaf()) {
    const std::weak_ptr<autograd::Node> node = grad_fn();
    const int id = grad_fn()->add_pre_hook(output_nr(), std::move(hook));
    return HookHandle([node, id] {
      if (auto n = node.lock()) n->remove_pre_hook(id);
    });
  }
  return add_leaf_hook(impl_, &AutogradMeta::hooks, std::move(hook));
}

HookHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  KILN_CHECK(requires_grad(), "cannot register a hook on a tensor that doesn't require gradient");
  KILN_CHECK(is_leaf(), "post accumulate grad hooks cannot be registered on non-leaf tensors");
  return add_leaf_hook(impl_, &AutogradMeta::post_accumulate_grad_hooks, std::move(hook));
}

Tensor Tensor::detach() const {
  const TensorImpl& t = checked();
  return Tensor(std::make_shared<TensorImpl>(t.storage(), t.sizes().vec(), t.strides().vec(),
                                             t.storage_offset(), t.dtype(), AutogradTerms{},
                                             Provenance{TensorOrigin::Detached, "detach()", {}}));
}

Tensor Tensor::as_leaf(bool requires_grad) const {
  const TensorImpl& t = checked();
  return Tensor(std::make_shared<TensorImpl>(
      t.storage(), t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.dtype(),
      AutogradTerms{requires_grad, nullptr, 0}, Provenance{TensorOrigin::Detached, "as_leaf()", {}}));
}

const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  // PyTorch refuses only requires_grad_(false) on an op's output (which requires grad anyway,
  // so requires_grad_(true) there changes nothing); its message names the fix.
  KILN_CHECK(is_leaf() || requires_grad,
             "you can only change requires_grad flags of leaf variables. If you want to use a computed variable "
             "in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
  if (is_leaf()) {
    impl_->set_leaf_requires_grad(requires_grad, impl_.use_count() > 1 || impl_->storage().use_count() > 1);
  }
  return *this;
}

}  // namespace kiln
