// core/tensor_impl.cpp — constructing TensorImpls and the layout helpers they need.
#include "core/tensor_impl.h"

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/messages.h"

namespace kiln {

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, Shape sizes, Shape strides,
                       std::int64_t storage_offset, DType dtype, AutogradTerms terms,
                       Provenance provenance)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      storage_offset_(storage_offset),
      numel_(compute_numel(sizes_)),
      dtype_(dtype),
      is_contiguous_(compute_is_contiguous(sizes_, strides_)),
      requires_grad_(terms.requires_grad),
      output_nr_(terms.output_nr),
      grad_fn_(std::move(terms.grad_fn)),
      provenance_(provenance) {
  KILN_CHECK(storage_ != nullptr, "TensorImpl needs a storage");
  KILN_CHECK(sizes_.size() == strides_.size(), "sizes and strides must have the same length (",
             sizes_.size(), " vs ", strides_.size(), ")");
  KILN_CHECK_TYPE(!requires_grad_ || is_floating_point(dtype_), msg::requires_grad_dtype(dtype_));
  KILN_CHECK(grad_fn_ == nullptr || requires_grad_,
             "a tensor with a grad_fn must require grad");
}

namespace {
std::atomic<std::uint64_t> leaf_requires_grad_changes{0};
}  // namespace

void TensorImpl::set_leaf_requires_grad(bool requires_grad, bool held_elsewhere) {
  KILN_CHECK(is_leaf(), "set_leaf_requires_grad on a tensor with a grad_fn");
  KILN_CHECK_TYPE(!requires_grad || is_floating_point(dtype_), msg::requires_grad_dtype(dtype_));
  if (requires_grad_ != requires_grad && held_elsewhere) {
    leaf_requires_grad_changes.fetch_add(1, std::memory_order_relaxed);
  }
  requires_grad_ = requires_grad;
}

std::uint64_t TensorImpl::requires_grad_changes() {
  return leaf_requires_grad_changes.load(std::memory_order_relaxed);
}

TensorImpl::~TensorImpl() { delete autograd_meta_.load(std::memory_order_acquire); }

AutogradMeta& TensorImpl::autograd_meta() {
  // Two threads may ask at once (a DataLoader worker and the training loop): the first
  // compare-exchange wins and the loser frees its copy.
  AutogradMeta* meta = autograd_meta_.load(std::memory_order_acquire);
  if (meta != nullptr) return *meta;
  auto* fresh = new AutogradMeta();
  if (autograd_meta_.compare_exchange_strong(meta, fresh, std::memory_order_acq_rel)) {
    return *fresh;
  }
  delete fresh;
  return *meta;
}

}  // namespace kiln
