// tests/support/op_table.h — the op table (PyTorch's OpInfo, ggml's test cases): every public
// op with hand-checked sample cases, the dtypes it supports, and whether it is
// differentiable. Generic tests iterate it:
//   tests/core/test_op_table.cpp       forward values in every dtype, non-contiguous inputs,
//                                      meta-device shape inference, kernel coverage
//   tests/autograd/test_op_gradcheck.cpp  gradcheck of every differentiable entry (also with
//                                      non-contiguous inputs) and Function coverage
// Adding an op means adding an entry here; a kernel or Function with no entry fails a test.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::testing {

/// How to build one input of a case. Float inputs are converted to the dtype under test;
/// index and mask inputs keep Int64 / Bool.
struct InputSpec {
  enum class Kind { Float, Index, Mask };
  Kind kind = Kind::Float;
  std::vector<double> values;
  Shape shape;
  /// Float inputs only: gradcheck differentiates with respect to it.
  bool differentiable = true;

  Tensor make(DType float_dtype, Device device = kCPU, bool requires_grad = false) const;
};

InputSpec F(std::vector<double> values, Shape shape);
/// A float input that is data, not a variable (a loss target, running statistics).
InputSpec C(std::vector<double> values, Shape shape);
InputSpec I(std::vector<double> values, Shape shape);
InputSpec M(std::vector<double> values, Shape shape);
/// `n` deterministic, distinct, non-integral values in [-2, 2] (for shapes too big to type).
std::vector<double> ramp(std::int64_t n, double start = -1.7, double step = 0.37);

struct OpCase {
  std::string label;
  std::vector<InputSpec> inputs;
  /// Hand-checked forward result, row-major (empty: only shape-checked).
  std::vector<double> expected;
  Shape expected_shape;
  /// Whether this case is smooth enough at its inputs for finite differences.
  bool gradcheck = true;
  /// Whether its second derivative is checked too (see the entry for why not).
  bool gradgradcheck = true;
};

struct OpInfo {
  std::string name;
  std::function<Tensor(const TensorList&)> fn;
  std::vector<OpCase> cases;
  /// Dtypes the float inputs are tested in (the expected values must hold in each).
  std::vector<DType> dtypes;
  bool differentiable = true;
  /// The kernel family members this entry exercises (names as in op_name()).
  std::vector<std::string> kernels;
};

const std::vector<OpInfo>& op_table();

/// Float32, Float64, Float16, BFloat16.
const std::vector<DType>& floating_dtypes();
/// The floating dtypes plus the integer ones (for ops whose cases use integer values).
const std::vector<DType>& numeric_dtypes();
/// The tolerance a result in `dtype` is held to (relative to magnitude).
double tolerance(DType dtype);

}  // namespace kiln::testing
