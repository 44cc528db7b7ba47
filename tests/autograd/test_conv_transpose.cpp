// tests/autograd/test_conv_transpose.cpp — conv_transpose2d is the transpose of conv2d: for
// every geometry its output equals conv2d's gradient with respect to the input (the
// definition, computed by autograd through conv2d, an independent route), and its own
// gradients (a composite of matmul and fold) pass gradcheck in Float64. Also leaky_relu's.
#include "support/test_util.h"

using namespace kiln;

namespace {

struct Geometry {
  Shape input;
  std::int64_t out_channels;
  Pair kernel, stride, padding, output_padding, dilation;
};

const Geometry kGeometries[] = {
    {{2, 3, 4, 5}, 2, 3, 1, 0, 0, 1},
    {{1, 2, 3, 3}, 4, {3, 2}, 2, 1, 1, 1},
    {{2, 2, 4, 3}, 3, 2, {2, 3}, {0, 1}, {1, 0}, 1},
    {{1, 3, 3, 4}, 2, 3, 2, 1, 0, 2},
};

TEST(ConvTranspose2d, IsTheGradientOfConv2dWithRespectToItsInput) {
  manual_seed(11);
  for (const Geometry& g : kGeometries) {
    const Tensor y = randn(g.input, kFloat64);
    const Tensor w = randn({g.input[1], g.out_channels, g.kernel[0], g.kernel[1]}, kFloat64);
    const Tensor out = conv_transpose2d(y, w, {}, g.stride, g.padding, g.output_padding, g.dilation);
    // conv2d maps [N, C_out, H_out, W_out] to y's shape with weight w ([C_in, C_out, kh, kw]
    // is conv2d's [out, in, kh, kw] layout for that direction).
    Tensor x = zeros(out.sizes(), dtype(kFloat64).requires_grad(true));
    const Tensor z = conv2d(x, w, {}, g.stride, g.padding, g.dilation);
    ASSERT_EQ(z.sizes(), y.sizes());
    (z * y).sum().backward();
    EXPECT_TRUE(kiln::testing::tensors_near(out, x.grad(), 1e-12));
  }
}

TEST(ConvTranspose2d, GradcheckInFloat64) {
  manual_seed(12);
  for (const Geometry& g : kGeometries) {
    const Tensor y = randn(g.input, dtype(kFloat64).requires_grad(true));
    const Tensor w = randn({g.input[1], g.out_channels, g.kernel[0], g.kernel[1]}, dtype(kFloat64).requires_grad(true));
    const Tensor b = randn({g.out_channels}, dtype(kFloat64).requires_grad(true));
    EXPECT_TRUE(autograd::gradcheck(
        [&](const TensorList& in) {
          return conv_transpose2d(in[0], in[1], in[2], g.stride, g.padding, g.output_padding, g.dilation);
        },
        {y, w, b}));
  }
}

TEST(ConvTranspose2d, ModuleShapesAndErrors) {
  nn::ConvTranspose2d up(4, 2, 4, {.stride = 2, .padding = 1});
  EXPECT_EQ(up.weight.sizes(), (Shape{4, 2, 4, 4}));
  EXPECT_EQ(up.forward(randn({3, 4, 5, 5})).sizes(), (Shape{3, 2, 10, 10}));
  EXPECT_ERROR(up.forward(randn({3, 2, 5, 5})), "to have 4 channels, but got 2 channels instead");
  EXPECT_ERROR(conv_transpose2d(randn({1, 4, 5, 5}), up.weight, {}, 2, 1, 2),
               "output padding must be smaller than either stride or dilation");
}

TEST(LeakyRelu, ValuesAndGradcheck) {
  const Tensor x = tensor({-2.0, -0.5, 0.5, 3.0}, dtype(kFloat64).requires_grad(true));
  EXPECT_EQ(kiln::testing::values(leaky_relu(x, 0.1)), (std::vector<double>{-0.2, -0.05, 0.5, 3.0}));
  EXPECT_TRUE(autograd::gradcheck([](const TensorList& in) { return leaky_relu(in[0], 0.2); }, {x}));
}

}  // namespace
