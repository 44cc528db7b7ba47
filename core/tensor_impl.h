// core/tensor_impl.h — TensorImpl: a Storage seen through sizes, strides (in elements) and an
// offset, with a dtype, and the autograd terms of its contract (requires_grad, grad_fn,
// output_nr). Everything here is fixed at construction: there are no setters (one private
// exception, for op outputs no one has seen yet: adopt_history_of_unseen_output). To change a
// term you create a new tensor (to, contiguous, detach, clone). See Note [The creation contract].
// Read next: core/tensor.h (the user-facing handle), core/autograd_meta.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/array_ref.h"
#include "core/dtype.h"
#include "core/provenance.h"
#include "core/shape.h"
#include "core/storage.h"

namespace kiln {

class Tensor;

namespace autograd {
class Node;  // defined in autograd/node.h; core only holds pointers. See Note [Layering].
namespace detail {
Tensor with_history(Tensor&& raw, const std::shared_ptr<Node>& node, std::uint32_t output_nr);
}
}  // namespace autograd

struct AutogradMeta;

/// The PyTorch-style name of a backward node ("MulBackward0"), for the layers above that name a
/// tensor's history in messages. Defined by the autograd layer, and never called by core
/// (Note [Layering]).
const char* node_name(const autograd::Node& node);

// Note [The creation contract]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Device, dtype, layout (sizes, strides, offset), requires_grad and grad_fn are arguments of
// TensorImpl's constructor and nothing changes them afterwards. PyTorch lets a tensor's
// history be rewritten (requires_grad_(), in-place ops rebasing grad_fn, .data assignment);
// each of those is a classic source of confusion, so Kiln has none of them but one:
//   - a tensor that should require grad is *created* so (options.requires_grad(true), or
//     as_leaf() to sign a new contract over the same memory); the one exception is PyTorch's
//     requires_grad_() on a *leaf*, which has no history to rewrite: freezing parameters
//     (`for (auto& p : model.parameters()) p.requires_grad_(false)`) must reach every handle,
//     so the flag changes in place; on an op's output it is refused, as in PyTorch;
//   - an op's output is created by the autograd layer *with* its grad_fn;
//   - in-place ops on a tensor that requires grad are refused while grad mode is on.
// What does change is state, not terms: the bytes (in-place ops under NoGradGuard, which bump
// the version counter) and the accumulated `.grad` of a leaf.

/// The autograd terms of a tensor, fixed at creation.
struct AutogradTerms {
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  std::uint32_t output_nr = 0;              // which output of grad_fn this tensor is
};

class TensorImpl {
 public:
  /// Throws "Only Tensors of floating point and complex dtype can require gradients" when
  /// requires_grad is asked of an integral or bool dtype.
  TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides,
             std::int64_t storage_offset, DType dtype, AutogradTerms terms,
             Provenance provenance);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  const std::shared_ptr<Storage>& storage() const { return storage_; }
  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  std::int64_t dim() const { return static_cast<std::int64_t>(sizes_.size()); }
  std::int64_t numel() const { return numel_; }
  std::int64_t storage_offset() const { return storage_offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return is_contiguous_; }
  /// First element's address (nullptr on the meta device or for empty storage).
  void* data() const {
    char* base = static_cast<char*>(storage_->data());
    return base == nullptr ? nullptr : base + storage_offset_ * itemsize(dtype_);
  }

  bool requires_grad() const { return requires_grad_; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return grad_fn_; }
  std::uint32_t output_nr() const { return output_nr_; }
  bool is_leaf() const { return grad_fn_ == nullptr; }
  /// A leaf's requires_grad, changed in place (Tensor::requires_grad_ checks that this is a
  /// leaf). See Note [The creation contract]. `held_elsewhere`: something besides the caller's
  /// handle holds this tensor or its memory (a module, an optimizer, a captured graph).
  void set_leaf_requires_grad(bool requires_grad, bool held_elsewhere);
  /// How many times the requires_grad of a leaf held elsewhere has been changed in place,
  /// process-wide: a compiled step captured before a change recaptures (a frozen or unfrozen
  /// parameter changes which gradients the step computes). A tensor only its maker holds (a
  /// batch made to require grad for an adversarial example) is in no graph, and not counted.
  static std::uint64_t requires_grad_changes();

  const Provenance& provenance() const { return provenance_; }
  /// Diagnostic only (not a term): set when an op produced this tensor with grad mode off
  /// while one of its inputs required grad, so explain() can say "computed under NoGradGuard".
  bool made_without_grad() const { return made_without_grad_; }
  void note_made_without_grad() const { made_without_grad_ = true; }

  /// Mutable autograd state (the `.grad` of a leaf, hooks, retain_grad), created on first use.
  AutogradMeta& autograd_meta();
  AutogradMeta* autograd_meta_if_exists() const {
    return autograd_meta_.load(std::memory_order_acquire);
  }

 private:
  std::shared_ptr<Storage> storage_;
  Shape sizes_;
  Shape strides_;
  std::int64_t storage_offset_;
  std::int64_t numel_;
  DType dtype_;
  bool is_contiguous_;
  bool requires_grad_;
  std::uint32_t output_nr_;
  std::shared_ptr<autograd::Node> grad_fn_;
  Provenance provenance_;
  mutable bool made_without_grad_ = false;
  std::atomic<AutogradMeta*> autograd_meta_{nullptr};  // owned; see autograd_meta()

  // An op's raw output that nothing else has seen yet gets its history here instead of being
  // copied into a second TensorImpl: no one could have observed it without one, so the
  // contract holds, and recording an op saves an allocation (Note [The creation contract]).
  friend Tensor autograd::detail::with_history(Tensor&& raw,
                                               const std::shared_ptr<autograd::Node>& node,
                                               std::uint32_t output_nr);
  void adopt_history_of_unseen_output(std::shared_ptr<autograd::Node> grad_fn,
                                      std::uint32_t output_nr) {
    requires_grad_ = true;
    grad_fn_ = std::move(grad_fn);
    output_nr_ = output_nr;
  }
};

}  // namespace kiln
