// autograd/functions/inplace.cpp — in-place ops (add_, mul_, copy_, fill_, ...).
// Each one first asks whether the write would break a creation contract (see
// check_inplace); if not, it runs the raw op, which bumps the version counter so that
// any saved copy of these bytes notices (Note [Version counters]).
// Read next: autograd/saved_variable.h.
#include <initializer_list>

#include "autograd/node.h"
#include "core/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/random.h"

namespace kiln {

namespace {

// Note [In-place ops and the creation contract]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch lets an in-place op rewrite a non-leaf's grad_fn ("rebase history"). In Kiln a
// tensor's grad_fn is fixed at creation, so while grad mode is on:
//  - an in-place op on a leaf that requires grad is refused (PyTorch's own message);
//  - on a non-leaf that requires grad it is refused too, pointing to the out-of-place op;
//  - on a tensor that does not require grad, with an argument that does, it is refused,
//    because the result would need a history the tensor was not created with.
// Under NoGradGuard nothing is recorded, so any tensor may be updated in place: that is how
// optimizers step parameters and how running statistics are updated.
void check_inplace(const Tensor& self, const char* op, const char* out_of_place,
                   std::initializer_list<const Tensor*> others = {}) {
  if (!is_grad_enabled()) return;
  if (self.requires_grad()) {
    KILN_CHECK(!self.is_leaf(),
               "a leaf Variable that requires grad is being used in an in-place operation.\n",
               msg::blame("self", self),
               "\nHint: update parameters inside a NoGradGuard scope (as optimizers do), or use "
               "the out-of-place ", out_of_place, "().");
    KILN_FAIL(op, "(): this tensor requires grad, and its grad_fn (", node_name(*self.grad_fn()),
              ") was fixed when it was created; Kiln never rewrites a tensor's history in place. "
              "Use the out-of-place ", out_of_place,
              "() and keep its result, or run the update inside a NoGradGuard scope if it must "
              "not be recorded.\n", msg::blame("self", self));
  }
  for (const Tensor* o : others) {
    KILN_CHECK(!o->requires_grad(), op,
               "(): the argument requires grad but this tensor was created without "
               "requires_grad, and an in-place op cannot give it a history. Use the out-of-place ",
               out_of_place, "() instead.\n", msg::blame("self", self), "\n",
               msg::blame("argument", *o));
  }
}

Tensor scaled(const Tensor& other, const Scalar& alpha) {
  if (alpha.to_double() == 1.0) return other;
  return ops::binary(BinaryOp::Mul, other, ops::wrapped_scalar(alpha));
}

void add_into(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_inplace(self, "add_", "add", {&other});
  ops::binary_(BinaryOp::Add, self, scaled(other, alpha));
}

void sub_into(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  check_inplace(self, "sub_", "sub", {&other});
  ops::binary_(BinaryOp::Sub, self, scaled(other, alpha));
}

void copy_into(const Tensor& self, const Tensor& src, bool non_blocking) {
  check_inplace(self, "copy_", "clone or to", {&src});
  ops::copy_(self, src, non_blocking);
}

void fill_into(const Tensor& self, const Scalar& value) {
  check_inplace(self, "fill_", "full_like");
  ops::fill_(self, value);
}

void mul_into(const Tensor& self, const Tensor& other) {
  check_inplace(self, "mul_", "mul", {&other});
  ops::binary_(BinaryOp::Mul, self, other);
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, const Scalar& alpha) {
  add_into(*this, other, alpha);
  return *this;
}
Tensor& Tensor::add_(const Scalar& other, const Scalar& alpha) {
  add_into(*this, ops::wrapped_scalar(other), alpha);
  return *this;
}
Tensor& Tensor::sub_(const Tensor& other, const Scalar& alpha) {
  sub_into(*this, other, alpha);
  return *this;
}
Tensor& Tensor::sub_(const Scalar& other, const Scalar& alpha) {
  sub_into(*this, ops::wrapped_scalar(other), alpha);
  return *this;
}
Tensor& Tensor::mul_(const Tensor& other) {
  mul_into(*this, other);
  return *this;
}
Tensor& Tensor::mul_(const Scalar& other) {
  mul_into(*this, ops::wrapped_scalar(other));
  return *this;
}
Tensor& Tensor::div_(const Tensor& other) {
  check_inplace(*this, "div_", "div", {&other});
  ops::binary_(BinaryOp::Div, *this, other);
  return *this;
}
Tensor& Tensor::div_(const Scalar& other) {
  check_inplace(*this, "div_", "div");
  ops::binary_(BinaryOp::Div, *this, ops::wrapped_scalar(other));
  return *this;
}
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  check_inplace(*this, "clamp_", "clamp");
  KILN_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  if (min) ops::binary_(BinaryOp::Maximum, *this, ops::wrapped_scalar(*min));
  if (max) ops::binary_(BinaryOp::Minimum, *this, ops::wrapped_scalar(*max));
  return *this;
}
Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  copy_into(*this, src, non_blocking);
  return *this;
}
Tensor& Tensor::fill_(const Scalar& value) {
  fill_into(*this, value);
  return *this;
}
Tensor& Tensor::zero_() {
  fill_into(*this, 0);
  return *this;
}
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) {
  check_inplace(*this, "masked_fill_", "masked_fill");
  ops::copy_(*this, ops::where(mask, ops::wrapped_scalar(value), *this));
  return *this;
}
Tensor& Tensor::uniform_(double from, double to) {
  check_inplace(*this, "uniform_", "rand_like");
  ops::random_(*this, RandomKind::Uniform, from, to);
  return *this;
}
Tensor& Tensor::normal_(double mean, double std) {
  check_inplace(*this, "normal_", "randn_like");
  ops::random_(*this, RandomKind::Normal, mean, std);
  return *this;
}

const Tensor& Tensor::add_(const Tensor& other, const Scalar& alpha) const {
  add_into(*this, other, alpha);
  return *this;
}
const Tensor& Tensor::sub_(const Tensor& other, const Scalar& alpha) const {
  sub_into(*this, other, alpha);
  return *this;
}
const Tensor& Tensor::mul_(const Scalar& other) const {
  mul_into(*this, ops::wrapped_scalar(other));
  return *this;
}
const Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  copy_into(*this, src, non_blocking);
  return *this;
}
const Tensor& Tensor::fill_(const Scalar& value) const {
  fill_into(*this, value);
  return *this;
}
const Tensor& Tensor::zero_() const {
  fill_into(*this, 0);
  return *this;
}

Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator+=(Tensor& a, const Scalar& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator-=(Tensor& a, const Scalar& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator*=(Tensor& a, const Scalar& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator/=(Tensor& a, const Scalar& b) { return a.div_(b); }

}  // namespace kiln
