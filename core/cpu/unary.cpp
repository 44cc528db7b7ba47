// core/cpu/unary.cpp — CPU kernels for the unary family (exp, log, relu, ...).
// Contiguous float/double inputs go through Eigen's vectorised array functions where Eigen
// has one (exp, log, tanh, sqrt: 4-16 lanes); everything else runs the shared functor
// through cpu_map, in OpMath (float for half types).
// Read next: core/cpu/binary.cpp.
#include <string>
#include <utility>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/eigen_exp.h"
#include "core/cpu/loops.h"
#include "core/dispatch.h"

namespace kiln::cpu {

namespace {

/// Ops for which Eigen has a vectorised array function on float and double.
template <UnaryOp Op, class T>
constexpr bool kHasEigenForm =
    (std::is_same_v<T, float> || std::is_same_v<T, double>) &&
    (Op == UnaryOp::Exp || Op == UnaryOp::Log || Op == UnaryOp::Tanh || Op == UnaryOp::Sqrt ||
     Op == UnaryOp::Rsqrt || Op == UnaryOp::Sigmoid);

template <UnaryOp Op, class T>
void eigen_unary(T* out, const T* in, std::int64_t n) {
  using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
  Eigen::Map<Array> o(out, n);
  Eigen::Map<const Array> a(in, n);
  if constexpr (Op == UnaryOp::Exp) assign_exp(o, a);
  else if constexpr (Op == UnaryOp::Log) o = a.log();
  else if constexpr (Op == UnaryOp::Tanh) o = a.tanh();
  else if constexpr (Op == UnaryOp::Sqrt) o = a.sqrt();
  else if constexpr (Op == UnaryOp::Rsqrt) o = a.rsqrt();
  else o = a.logistic();
}

std::string kernel_name(UnaryOp op) { return std::string(op_name(op)) + "_cpu"; }

template <UnaryOp Op, class F>
void unary_kernel(const Tensor& out, const Tensor& in) {
  static const std::string name = kernel_name(Op);  // built once per kernel, not per call
  dispatch_dtype<CpuTypes<typename F::dtypes>>(in.dtype(), name.c_str(), [&]<typename T>() {
    if constexpr (kHasEigenForm<Op, T>) {
      if (out.is_contiguous() && in.is_contiguous()) {
        T* o = out.data_ptr<T>();
        const T* a = in.data_ptr<T>();
        parallel_for(0, out.numel(), kGrainSize, [&](std::int64_t b, std::int64_t e) {
          eigen_unary<Op, T>(o + b, a + b, e - b);
        });
        return;
      }
    }
    cpu_map<T, T>([](T a) { return from_op_math<T>(F{}(to_op_math(a))); }, out, {&in});
  });
}

template <UnaryOp Op>
bool has_eigen_form(DType dtype) {
  return dtype == kFloat32 ? kHasEigenForm<Op, float> : dtype == kFloat64 && kHasEigenForm<Op, double>;
}

template <std::size_t... I>
bool has_eigen_form(UnaryOp op, DType dtype, std::index_sequence<I...>) {
  bool found = false;
  ((static_cast<std::size_t>(op) == I ? (found = has_eigen_form<static_cast<UnaryOp>(I)>(dtype)) : false), ...);
  return found;
}

}  // namespace

bool unary_has_vectorised_form(UnaryOp op, DType dtype) {
  return has_eigen_form(op, dtype, std::make_index_sequence<static_cast<std::size_t>(UnaryOp::kCount)>{});
}

std::array<UnaryKernel, static_cast<std::size_t>(UnaryOp::kCount)> unary_kernels() {
  using namespace functors;
  // Same order as the UnaryOp enum.
  return exactly_one_per<UnaryKernel, UnaryOp>(
      &unary_kernel<UnaryOp::Neg, Neg>,
      &unary_kernel<UnaryOp::Exp, Exp>,
      &unary_kernel<UnaryOp::Log, Log>,
      &unary_kernel<UnaryOp::Sqrt, Sqrt>,
      &unary_kernel<UnaryOp::Rsqrt, Rsqrt>,
      &unary_kernel<UnaryOp::Abs, Abs>,
      &unary_kernel<UnaryOp::Sign, Sign>,
      &unary_kernel<UnaryOp::Relu, Relu>,
      &unary_kernel<UnaryOp::Sigmoid, Sigmoid>,
      &unary_kernel<UnaryOp::Tanh, Tanh>,
      &unary_kernel<UnaryOp::Gelu, Gelu>,
      &unary_kernel<UnaryOp::Erf, Erf>,
      &unary_kernel<UnaryOp::Reciprocal, Reciprocal>);
}

}  // namespace kiln::cpu
