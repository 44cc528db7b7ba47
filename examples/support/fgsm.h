// examples/support/fgsm.h — the Fast Gradient Sign Method (Goodfellow et al., 2015): move each
// pixel by eps in the direction that increases the loss, x_adv = clamp(x + eps·sign(∂L/∂x), 0, 1).
//
// The creation contract at work: ∂L/∂x exists only if x was *created* with requires_grad (the
// reference articles call this the core of the attack). A tensor made without it is not
// tracked, backward() leaves x.grad() undefined, and the attack has nothing to follow — so
// fgsm() says so instead of dereferencing an empty gradient.
// Read next: examples/fgsm.cpp.
#pragma once

#include <functional>

#include "core/messages.h"
#include "kiln.h"

namespace kiln::examples {

/// The message for an attack on an input that was created without requires_grad.
inline std::string fgsm_needs_grad_message(const Tensor& images) {
  return "fgsm: the input images do not require grad, so backward() cannot compute d(loss)/d(images) "
         "and images.grad() stays undefined.\n"
         "Create the input with requires_grad at creation: kiln::tensor(..., kiln::requires_grad()) or "
         "images.detach().as_leaf(true).\n" + msg::blame("images", images);
}

/// The adversarial version of `images` (pixels in [0, 1], created with requires_grad) against
/// `model`, whose input is `input(images)`. Leaves `images.grad()` holding ∂loss/∂images.
inline Tensor fgsm(nn::Module& model, const Tensor& images, const Tensor& labels, double eps,
                   const std::function<Tensor(const Tensor&)>& input = [](const Tensor& x) { return x; }) {
  KILN_CHECK(images.requires_grad(), fgsm_needs_grad_message(images));
  KILN_CHECK(images.is_leaf(), "fgsm: the input images must be a leaf (created with requires_grad, not "
             "computed from one), so that backward() stores their gradient in .grad()\n" +
             msg::blame("images", images));
  const Tensor loss = cross_entropy(model.forward(input(images)), labels);
  loss.backward();
  NoGradGuard no_grad;
  return (images + eps * images.grad().sign()).clamp(0.0, 1.0);
}

}  // namespace kiln::examples
