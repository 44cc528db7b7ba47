// tests/autograd/test_gradcheck.cpp — gradcheck itself: it passes a right formula, fails a
// wrong one with a report that names the output, input, element and both values, and
// refuses Float32 inputs. Also shows how a user writes a custom Function.
#include "autograd/function.h"
#include "support/test_util.h"

using namespace kiln;

namespace {

// A user-defined op, written exactly as Kiln's own are: y = x^2 with a chosen backward.
template <bool Correct>
struct SquareFn : autograd::Function<SquareFn<Correct>> {
  static constexpr const char* name = "SquareBackward0";
  static Tensor forward(autograd::Context<SquareFn>& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x.detach() * x.detach();
  }
  // d(x^2)/dx = 2x  (the wrong variant forgets the factor 2)
  static TensorList backward(autograd::Context<SquareFn>& ctx, const TensorList& g) {
    const Tensor x = ctx.get_saved_variables()[0];
    return {Correct ? g[0] * x * 2 : g[0] * x};
  }
};

}  // namespace

TEST(Gradcheck, AcceptsARightFormula) {
  Tensor x = tensor({0.5, -1.5, 2.0}, dtype(kFloat64).requires_grad(true));
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return SquareFn<true>::apply(in[0]); }, {x}));
}

TEST(Gradcheck, CatchesAWrongFormulaAndSaysWhere) {
  Tensor x = tensor({0.5, -1.5, 2.0}, dtype(kFloat64).requires_grad(true));
  auto wrong = [](const TensorList& in) { return SquareFn<false>::apply(in[0]); };
  autograd::GradcheckOptions quiet;
  quiet.raise_exception = false;
  EXPECT_FALSE(autograd::gradcheck(wrong, {x}, quiet));
  const std::string report = kiln::testing::error_of([&] { autograd::gradcheck(wrong, {x}); });
  // d(x0^2)/dx0 = 2 * 0.5 = 1 numerically; the wrong formula says 0.5.
  EXPECT_NE(report.find("Jacobian mismatch for output 0 with respect to input 0"), std::string::npos) << report;
  EXPECT_NE(report.find("at output element 0, input element 0"), std::string::npos) << report;
  EXPECT_NE(report.find("numerical: 1\nanalytical: 0.5"), std::string::npos) << report;
}

TEST(Gradcheck, NeedsFloat64) {
  Tensor x = tensor({0.5}, requires_grad());
  EXPECT_ERROR(autograd::gradcheck([](const TensorList& in) { return in[0] * 2; }, {x}),
               "gradcheck needs Float64 inputs with data");
}
