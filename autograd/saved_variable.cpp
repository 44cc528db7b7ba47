// autograd/saved_variable.cpp — saving tensors for backward, with version checks.
#include "autograd/saved_variable.h"

#include "autograd/node.h"
#include "core/capture_hooks.h"

namespace kiln::autograd {

std::string type_and_shape(const Tensor& t) {
  std::string s = "kiln.";
  if (t.is_cuda()) s += "cuda.";
  s += scalar_type_name(t.dtype());
  s += "Tensor ";
  return s + kiln::detail::str_cat(t.sizes());
}

SavedVariable::SavedVariable(const Tensor& t, int output_nr)
    : saved_version_(t.defined() ? t._version() : 0), output_nr_(output_nr) {
  if (!t.defined()) return;
  // For an output this is the raw tensor, created before its grad_fn: it keeps the bytes,
  // not the node, so node -> saved output -> node is not a cycle.
  requires_grad_ = t.requires_grad() || (output_nr >= 0 && t.is_floating_point());
  if (const auto& hooks = current_saved_tensors_hooks()) [[unlikely]] {
    // pack and unpack are host code (a list of offloaded tensors) that a compiled step's
    // kernel list would not repeat, unless all they do is choose tensors that ops make.
    if (!hooks->made_by_ops) capture::not_replayable("a saved-tensors hook (autograd::SavedTensorsHooksGuard)");
    hooks_ = hooks;
    packed_ = hooks->pack(t);
  } else {
    data_ = t;
  }
  if (output_nr < 0) {
    producer_ = t.grad_fn();
    producer_output_ = t.output_nr();
  }
}

Tensor SavedVariable::unpack(const std::shared_ptr<Node>& owner) const {
  KILN_CHECK(!released_,
             "Trying to backward through the graph a second time (or directly access saved "
             "tensors after they have already been freed). Saved intermediate values of the graph "
             "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if "
             "you need to backward through the graph a second time or if you need to access saved "
             "tensors after calling backward.");
  if (hooks_) return with_grad_fn(hooks_->unpack(packed_), owner);
  if (!data_.defined()) return {};
  if (data_._version() != saved_version_) {
    std::string which;
    if (output_nr_ >= 0 && owner) {
      which = kiln::detail::str_cat(", which is output ", output_nr_, " of ", owner->name(), ",");
    } else if (auto p = producer_.lock()) {
      which = kiln::detail::str_cat(", which is output ", producer_output_, " of ", p->name(), ",");
    }
    KILN_FAIL("one of the variables needed for gradient computation has been modified by an "
              "inplace operation: [", type_and_shape(data_), "]", which, " is at version ",
              data_._version(), "; expected version ", saved_version_,
              " instead. Hint: the tensor was changed in place (an `_` op, copy_, or a write "
              "through a view, e.g. under NoGradGuard) after the forward op saved it. Use the "
              "out-of-place op, or clone() the tensor before modifying it.\n",
              msg::blame("saved tensor", data_));
  }
  return with_grad_fn(data_, owner);
}

Tensor SavedVariable::with_grad_fn(const Tensor& data, const std::shared_ptr<Node>& owner) const {
  if (data.defined() && output_nr_ >= 0 && owner && requires_grad_) {
    // Give the output its grad_fn back, so double backward flows through this node.
    return Tensor(std::make_shared<TensorImpl>(
        data.impl()->storage(), data.sizes().vec(), data.strides().vec(),
        data.storage_offset(), data.dtype(),
        AutogradTerms{true, owner, static_cast<std::uint32_t>(output_nr_)}, data.provenance()));
  }
  return data;
}

std::string SavedVariable::summary() const {
  if (released_) return "(freed)";
  if (hooks_) return "(packed by saved tensors hooks)";
  if (!data_.defined()) return "(none)";
  return type_and_shape(data_);
}

}  // namespace kiln::autograd
