// nn/backward_hook.cpp — the identity nodes of Note [Full backward hooks] and the bookkeeping
// that turns what they see into (grad_input, grad_output).
#include "nn/backward_hook.h"

#include <algorithm>

#include "autograd/function.h"
#include "autograd/node.h"
#include "core/grad_mode.h"

namespace kiln::nn {

namespace {

/// Passes gradients through unchanged, telling the BackwardHook what passed: PyTorch's
/// BackwardHookFunction, under the name its node has there.
class BackwardHookFunctionBackward final : public autograd::Node {
 public:
  using Handler = TensorList (BackwardHook::*)(TensorList);
  BackwardHookFunctionBackward(std::shared_ptr<BackwardHook> owner, Handler handler)
      : owner_(std::move(owner)), handler_(handler) {}

  // d(identity)/dx = 1: the gradient goes on as the hook leaves it.
  TensorList apply(TensorList&& grads) override { return ((*owner_).*handler_)(std::move(grads)); }
  const char* name() const override { return "BackwardHookFunctionBackward"; }

 private:
  std::shared_ptr<BackwardHook> owner_;
  Handler handler_;
};

std::vector<std::size_t> requiring_grad(const TensorList& tensors) {
  std::vector<std::size_t> indices;
  if (!is_grad_enabled()) return indices;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].defined() && tensors[i].requires_grad()) indices.push_back(i);
  }
  return indices;
}

}  // namespace

BackwardHook::BackwardHook(Module& module, std::vector<FullBackwardHook> hooks,
                           std::vector<FullBackwardPreHook> pre_hooks)
    : module_(module), hooks_(std::move(hooks)), pre_hooks_(std::move(pre_hooks)) {}

TensorList BackwardHook::setup_input_hook(TensorList args) {
  n_inputs_ = args.size();
  input_indices_ = requiring_grad(args);
  return wrap(std::move(args), input_indices_, Side::Input);
}

TensorList BackwardHook::setup_output_hook(TensorList results) {
  n_outputs_ = results.size();
  output_indices_ = requiring_grad(results);
  return wrap(std::move(results), output_indices_, Side::Output);
}

TensorList BackwardHook::wrap(TensorList args, const std::vector<std::size_t>& indices, Side side) {
  if (indices.empty()) return args;
  auto node = std::make_shared<BackwardHookFunctionBackward>(
      shared_from_this(), side == Side::Input ? &BackwardHook::on_grad_input : &BackwardHook::on_grad_output);
  for (std::size_t i : indices) {
    node->add_next_edge(autograd::gradient_edge(args[i]));
    const std::uint32_t output_nr = node->add_output(args[i]);
    args[i] = autograd::detail::with_history(Tensor(args[i]), node, output_nr);
  }
  return args;
}

TensorList BackwardHook::scatter(const std::vector<std::size_t>& indices, const TensorList& values,
                                 std::size_t size) {
  TensorList out(size);
  for (std::size_t k = 0; k < indices.size(); ++k) out[indices[k]] = values[k];
  return out;
}

TensorList BackwardHook::on_grad_output(TensorList grads) {
  grad_outputs_ = scatter(output_indices_, grads, n_outputs_);
  for (const FullBackwardPreHook& hook : pre_hooks_) {
    std::optional<TensorList> result = hook(module_, *grad_outputs_);
    if (!result) continue;
    KILN_CHECK(result->size() == n_outputs_, "Backward pre hook returned an invalid number of grad_output, got ",
               result->size(), ", but expected ", n_outputs_);
    grad_outputs_ = std::move(*result);
  }
  // What flows on into the module: grad_output as the pre-hooks left it.
  for (std::size_t k = 0; k < output_indices_.size(); ++k) grads[k] = (*grad_outputs_)[output_indices_[k]];
  if (input_indices_.empty()) {
    // No input requires grad, so no input node will run: the hooks run here.
    const TensorList grad_inputs(n_inputs_);
    for (const FullBackwardHook& hook : hooks_) {
      const std::optional<TensorList> result = hook(module_, grad_inputs, *grad_outputs_);
      KILN_CHECK(!result || std::none_of(result->begin(), result->end(), [](const Tensor& t) { return t.defined(); }),
                 "Backward hook for Modules where no input requires gradient should always return None or None "
                 "for all gradients.");
    }
    grad_outputs_.reset();
  }
  return grads;
}

TensorList BackwardHook::on_grad_input(TensorList grads) {
  // No output got a gradient (the output node never ran): nothing to report.
  if (!grad_outputs_) return grads;
  TensorList grad_inputs = scatter(input_indices_, grads, n_inputs_);
  for (const FullBackwardHook& hook : hooks_) {
    std::optional<TensorList> result = hook(module_, grad_inputs, *grad_outputs_);
    if (!result) continue;
    KILN_CHECK(result->size() == grad_inputs.size(), "Backward hook returned an invalid number of grad_input, got ",
               result->size(), ", but expected ", grad_inputs.size());
    grad_inputs = std::move(*result);
  }
  grad_outputs_.reset();
  for (std::size_t k = 0; k < input_indices_.size(); ++k) grads[k] = grad_inputs[input_indices_[k]];
  return grads;
}

}  // namespace kiln::nn
