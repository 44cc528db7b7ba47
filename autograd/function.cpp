// autograd/function.cpp — the non-template half of Function<Derived>.
#include "autograd/function.h"

#include "core/creation.h"

namespace kiln::autograd {

namespace detail {

Tensor with_history(Tensor&& raw, const std::shared_ptr<Node>& node, std::uint32_t output_nr) {
  // Integer and bool outputs (indices, masks) never require grad.
  if (!raw.defined() || !raw.is_floating_point()) return std::move(raw);
  // Only `raw` holds it: the forward made it and saved nothing that refers to it, so it can
  // take its grad_fn now. Otherwise (a saved output, an input returned as is) the output is a
  // new TensorImpl over the same memory.
  if (raw.impl_ptr().use_count() == 1 && !raw.requires_grad()) {
    raw.impl()->adopt_history_of_unseen_output(node, output_nr);
    return std::move(raw);
  }
  const TensorImpl& r = *raw.impl();
  return Tensor(std::make_shared<TensorImpl>(r.storage(), r.sizes().vec(), r.strides().vec(),
                                             r.storage_offset(), r.dtype(),
                                             AutogradTerms{true, node, output_nr}, r.provenance()));
}

}  // namespace detail

Tensor zeros_for(const OutputMeta& meta) {
  return zeros(meta.sizes, TensorOptions().dtype(meta.dtype).device(meta.device));
}

}  // namespace kiln::autograd
