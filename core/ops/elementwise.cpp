// core/ops/elementwise.cpp — raw elementwise ops (see core/ops/elementwise.h).
#include "core/ops/elementwise.h"

#include "core/kernels.h"
#include "core/meta_allocations.h"
#include "core/ops/allocate.h"
#include "core/ops/checks.h"
#include "core/ops/copy.h"
#include "core/ops/reduce.h"
#include "core/type_promotion.h"

namespace kiln {

const char* op_name(UnaryOp op) {
  static constexpr const char* names[] = {"neg",  "exp",     "log",  "sqrt", "rsqrt", "abs",       "sign",
                                   "relu", "sigmoid", "tanh", "gelu", "erf",   "reciprocal"};
  static_assert(std::size(names) == static_cast<std::size_t>(UnaryOp::kCount));
  return names[static_cast<int>(op)];
}

const char* op_name(BinaryOp op) {
  static constexpr const char* names[] = {"add", "sub", "mul", "div", "pow", "maximum",
                                          "minimum", "threshold_backward", "gelu_backward", "eq", "ne", "lt", "le",
                                          "gt", "ge", "logical_and", "logical_or", "logical_xor"};
  static_assert(std::size(names) == static_cast<std::size_t>(BinaryOp::kCount));
  return names[static_cast<int>(op)];
}

namespace ops {

Tensor wrapped_scalar(const Scalar& value) {
  const DType dtype = value.is_floating_point() ? DType::Float64
                      : value.is_bool()         ? DType::Bool
                                                : DType::Int64;
  const Device device = wrapped_number_device();
  auto storage = Storage::allocate(itemsize(dtype), device, false, {MemoryOrigin::Allocated, "wrapped number", {}});
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), Shape{}, Shape{}, 0, dtype,
                                        AutogradTerms{},
                                        Provenance{TensorOrigin::WrappedNumber, "scalar", {}}));
  kernels_for(device.type()).fill(t, value);
  return t;
}

DType unary_result_dtype(UnaryOp op, DType input) {
  switch (op) {
    case UnaryOp::Neg:
      KILN_CHECK_TYPE(input != DType::Bool,
                      "Negation, the `-` operator, on a bool tensor is not supported. If you are "
                      "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
      return input;
    case UnaryOp::Abs:
    case UnaryOp::Sign:
    case UnaryOp::Relu: return input;
    default:
      // Transcendental ops compute in floating point: integers and bool promote.
      return is_floating_point(input) ? input : default_dtype();
  }
}

namespace {

/// Moves a CPU 0-dim operand to `device` (the one case where devices may differ).
Tensor on_device(const Tensor& t, Device device) {
  return t.device() == device ? t : to_device(t, device, false);
}

}  // namespace

Tensor unary(UnaryOp op, const Tensor& x) {
  const DType dtype = unary_result_dtype(op, x.dtype());
  Tensor out = empty_output(x.sizes(), dtype, x.device(), op_name(op));
  // The kernel's input in the output's dtype: a copy when it differs.
  const Tensor input = to_dtype(x, dtype);
  require_kernel(kernels_for(x.device().type()).unary[static_cast<int>(op)], op_name(op), x.device())(out, input);
  return out;
}

namespace {

struct BinaryPlan {
  DType compute;  // dtype the kernel reads
  DType output;   // dtype it writes
};

BinaryPlan plan_binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const DType common = result_type(a, b);
  if (is_comparison(op)) return {common, DType::Bool};
  if (is_logical(op)) return {DType::Bool, DType::Bool};
  switch (op) {
    case BinaryOp::Sub:
      KILN_CHECK_TYPE(common != DType::Bool,
                      "Subtraction, the `-` operator, with two bool tensors is not supported. "
                      "Use the `^` or `logical_xor()` operator instead.");
      return {common, common};
    case BinaryOp::Div: {
      // True division: integers divide in the default floating dtype.
      const DType d = is_floating_point(common) ? common : default_dtype();
      return {d, d};
    }
    default: return {common, common};
  }
}

void check_pow_exponent(const Tensor& exponent, DType compute) {
  if (is_floating_point(compute) || compute == DType::Bool || !has_data(exponent.device())) return;
  if (exponent.numel() == 0) return;
  KILN_CHECK(amin(to_dtype(exponent, DType::Int64), {}, false).item<std::int64_t>() >= 0,
             "Integers to negative integer powers are not allowed.");
}

}  // namespace

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const Device device = common_device({{"self", &a}, {"other", &b}});
  const BinaryPlan plan = plan_binary(op, a, b);
  Tensor out = empty_output(broadcast_shapes(a.sizes(), b.sizes()), plan.output, device, op_name(op));
  const Tensor rhs = on_device(to_dtype(b, plan.compute), device);
  const Tensor lhs = on_device(to_dtype(a, plan.compute), device);
  if (op == BinaryOp::Pow) check_pow_exponent(b, plan.compute);
  require_kernel(kernels_for(device.type()).binary[static_cast<int>(op)], op_name(op), device)(out, lhs, rhs);
  return out;
}

void binary_(BinaryOp op, const Tensor& self, const Tensor& other) {
  const Device device = common_device({{"self", &self}, {"other", &other}});
  KILN_CHECK(device == self.device(), msg::same_device("self", self, "other", other));
  const BinaryPlan plan = plan_binary(op, self, other);
  KILN_CHECK_TYPE(can_cast(plan.output, self.dtype()), "result type ",
                  scalar_type_name(plan.output), " can't be cast to the desired output type ",
                  scalar_type_name(self.dtype()));
  const Shape shape = broadcast_shapes(self.sizes(), other.sizes());
  KILN_CHECK(IntArrayRef(shape) == self.sizes(), "output with shape ", self.sizes(),
             " doesn't match the broadcast shape ", IntArrayRef(shape));
  Tensor rhs = on_device(to_dtype(other, plan.compute), device);
  // An input that overlaps self in a different order (x.add_(x.t())) would be read after it
  // was written: read it from a copy.
  if (rhs.shares_memory(self) && !(rhs.sizes() == self.sizes() && rhs.strides() == self.strides() &&
                                   rhs.storage_offset() == self.storage_offset())) {
    rhs = clone(rhs);
  }
  if (op == BinaryOp::Pow) check_pow_exponent(rhs, plan.compute);
  const auto kernel =
      require_kernel(kernels_for(device.type()).binary[static_cast<int>(op)], op_name(op), device);
  if (plan.output == self.dtype() && plan.compute == self.dtype()) {
    kernel(self, self, rhs);
  } else {
    Tensor result = empty_output(self.sizes(), plan.output, device, op_name(op));
    kernel(result, to_dtype(self, plan.compute), rhs);
    kernels_for(device.type()).copy(self, result);
  }
  self.impl()->storage()->bump_version();
}

Tensor logical_not(const Tensor& x) {
  return binary(BinaryOp::Eq, to_dtype(x, DType::Bool), wrapped_scalar(false));
}

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  KILN_CHECK_TYPE(condition.dtype() == DType::Bool,
                  "where expected condition to be a boolean tensor, but got a tensor with dtype ",
                  scalar_type_name(condition.dtype()));
  const Device device = common_device({{"condition", &condition}, {"self", &a}, {"other", &b}});
  const DType dtype = result_type(a, b);
  Tensor out = empty_output(broadcast_shapes(condition.sizes(), broadcast_shapes(a.sizes(), b.sizes())),
                            dtype, device, "where");
  const Tensor other = on_device(to_dtype(b, dtype), device);
  const Tensor self = on_device(to_dtype(a, dtype), device);
  require_kernel(kernels_for(device.type()).where, "where", device)(out, on_device(condition, device), self, other);
  return out;
}

Tensor clamp(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  KILN_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  Tensor out = x;
  if (min) out = binary(BinaryOp::Maximum, out, wrapped_scalar(*min));
  if (max) out = binary(BinaryOp::Minimum, out, wrapped_scalar(*max));
  return out;
}

}  // namespace ops
}  // namespace kiln
