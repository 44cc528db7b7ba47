// core/cpu/binary.cpp — CPU kernels for the binary family (add ... logical_xor) and where.
// Arithmetic writes the operands' dtype; comparisons and logical ops write Bool. Half types
// compute in float (OpMath) and round once on store.
// Read next: core/cpu/copy.cpp.
#include <string>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/loops.h"
#include "core/cpu/select.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {

std::string kernel_name(BinaryOp op) { return std::string(op_name(op)) + "_cpu"; }

template <BinaryOp Op, class F>
void binary_kernel(const Tensor& out, const Tensor& a, const Tensor& b) {
  static const std::string name = kernel_name(Op);  // built once per kernel, not per call
  dispatch_dtype<CpuTypes<typename F::dtypes>>(a.dtype(), name.c_str(), [&]<typename T>() {
    using M = OpMath<T>;
    if constexpr (is_comparison(Op) || is_logical(Op)) {
      cpu_map<bool, T, T>(
          [](T x, T y) { return F{}(static_cast<M>(x), static_cast<M>(y)); }, out, {&a, &b});
    } else {
      cpu_map<T, T, T>([](T x, T y) { return from_op_math<T>(F{}(to_op_math(x), to_op_math(y))); }, out, {&a, &b});
    }
  });
}

}  // namespace

std::array<BinaryKernel, static_cast<std::size_t>(BinaryOp::kCount)> binary_kernels() {
  using namespace functors;
  using B = BinaryOp;
  // Same order as the BinaryOp enum.
  return exactly_one_per<BinaryKernel, BinaryOp>(
      &binary_kernel<B::Add, Add>,
      &binary_kernel<B::Sub, Sub>,
      &binary_kernel<B::Mul, Mul>,
      &binary_kernel<B::Div, Div>,
      &binary_kernel<B::Pow, Pow>,
      &binary_kernel<B::Maximum, Maximum>,
      &binary_kernel<B::Minimum, Minimum>,
      &binary_kernel<B::ThresholdBackward, ThresholdBackward>,
      &binary_kernel<B::GeluBackward, GeluBackward>,
      &binary_kernel<B::Eq, Eq>,
      &binary_kernel<B::Ne, Ne>,
      &binary_kernel<B::Lt, Lt>,
      &binary_kernel<B::Le, Le>,
      &binary_kernel<B::Gt, Gt>,
      &binary_kernel<B::Ge, Ge>,
      &binary_kernel<B::LogicalAnd, LogicalAnd>,
      &binary_kernel<B::LogicalOr, LogicalOr>,
      &binary_kernel<B::LogicalXor, LogicalXor>);
}

void where_kernel(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  dispatch_dtype<AllTypes>(out.dtype(), "where_cpu", [&]<typename T>() {
    cpu_map<T, bool, T, T>([](bool c, T x, T y) { return select(c, x, y); }, out, {&cond, &a, &b});
  });
}

}  // namespace kiln::cpu
