// autograd/gradcheck.h — checks backward formulas against finite differences (LibTorch has
// no C++ gradcheck; Kiln makes it public API).
//
//   auto x = kiln::randn({3}, kiln::dtype(kiln::kFloat64).requires_grad(true));
//   kiln::autograd::gradcheck([](const kiln::TensorList& in) { return in[0].exp(); }, {x});
//
// The numerical Jacobian uses central differences, (f(x + eps) - f(x - eps)) / 2 eps, one
// input element at a time; the analytical one runs backward once per output element. Inputs
// must be Float64: in Float32 the finite differences themselves are too noisy to judge by.
// Read next: tests/support/op_table.h (every op is checked this way).
#pragma once

#include <functional>
#include <string>

#include "core/tensor.h"

namespace kiln::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  /// Throw an Error with the report on mismatch (otherwise return false).
  bool raise_exception = true;
};

using GradcheckFn = std::function<TensorList(const TensorList&)>;

/// True when, for every output and every input that requires grad, the analytical Jacobian
/// matches the numerical one within atol + rtol * |numerical|. On mismatch the report names
/// the output index, input index, element, and both values.
bool gradcheck(const GradcheckFn& fn, const TensorList& inputs, GradcheckOptions options = {});
bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               GradcheckOptions options = {});

/// Checks second derivatives: gradcheck of "inputs, grad_outputs -> d(fn)/d(inputs)" with
/// create_graph, so the backward formulas' own backward is checked too.
bool gradgradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                   GradcheckOptions options = {});

}  // namespace kiln::autograd
