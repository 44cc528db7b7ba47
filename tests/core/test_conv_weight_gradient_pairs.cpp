// tests/core/test_conv_weight_gradient_pairs.cpp — the BFloat16 weight gradient in pairs (Note
// [A weight gradient in BFloat16 pairs]): within BFloat16's rounding of the Float64 gradient of
// the same BFloat16 values, over the geometries it serves (one and two blocks a tile, several
// chunks, kernels 1 to 5 tall, padding 0 to 2); the same bits from activations in channel
// blocks and in NCHW and on one thread or two; the eager op and the compiled step's fused
// backward through the pool taking it alike; and refusing what it does not serve.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/backends.h"
#include "core/cpu/channel_blocks.h"
#include "core/cpu/conv_weight_gradient_pairs.h"
#include "core/ops/conv.h"
#include "support/test_util.h"

namespace kiln {
namespace {

class WeightGradientPairs : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef __AVX512BF16__
    GTEST_SKIP() << "the pair kernel needs AVX512_BF16 in the build";
#endif
    if (backends::onednn_cpu_isa() == "avx512_core_amx") GTEST_SKIP() << "oneDNN's AMX kernels take this route";
  }
};

/// [N, C, H, W] -> [N, C / 16, H, W, 16], the layout oneDNN's primitives and compiled steps keep.
Tensor to_blocks(const Tensor& t) {
  const std::int64_t n = t.sizes()[0], c = t.sizes()[1], h = t.sizes()[2], w = t.sizes()[3];
  return t.reshape({n, c / 16, 16, h, w}).permute({0, 1, 3, 4, 2}).contiguous();
}
ChannelBlockedLayout blocks_of(const Tensor& t) {
  return cpu::dense_channel_blocks(t.sizes()[0], t.sizes()[1], t.sizes()[2], t.sizes()[3], 16);
}

struct Case {
  std::int64_t n, c, o, h, w, kernel_h, pad_h, pad_w;
  std::string name() const {
    return std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) + " -> " +
           std::to_string(o) + ", kernel " + std::to_string(kernel_h) + "x3, padding " + std::to_string(pad_h) + "," +
           std::to_string(pad_w);
  }
  Im2ColGeometry geometry() const {
    return ops::im2col_geometry({n, c, h, w}, {kernel_h, 3}, {1, 1}, {pad_h, pad_w}, {1, 1});
  }
};

TEST_F(WeightGradientPairs, IsWithinBFloat16RoundingOfTheFloat64Gradient) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  manual_seed(3);
  for (const Case& k : {Case{20, 32, 64, 14, 14, 3, 1, 1}, Case{3, 16, 16, 9, 10, 1, 0, 1},
                        Case{2, 48, 32, 7, 6, 5, 2, 0}, Case{1, 32, 16, 5, 4, 3, 0, 2}}) {
    const Im2ColGeometry g = k.geometry();
    const Tensor input = relu(randn({k.n, k.c, k.h, k.w})).to(kBFloat16);
    const Tensor grad_output = randn({k.n, k.o, g.out_h, g.out_w}).to(kBFloat16);
    const Tensor grad_weight = empty({k.o, k.c, k.kernel_h, 3}, TensorOptions().dtype(kBFloat16));
    const Tensor grad_bias = empty({k.o}, TensorOptions().dtype(kBFloat16));
    ASSERT_TRUE(cpu::conv2d_weight_gradient_in_pairs(grad_weight, grad_bias, grad_output, {}, input, {}, g))
        << k.name();

    // The same BFloat16 values in Float64: the sum, and the sum of the terms' magnitudes.
    const Tensor x = input.to(kFloat64), dy = grad_output.to(kFloat64);
    const Tensor want = empty({k.o, k.c, k.kernel_h, 3}, TensorOptions().dtype(kFloat64));
    const Tensor want_bias = empty({1, k.o, 1, 1}, TensorOptions().dtype(kFloat64));
    cpu.conv2d.backward_weight_bias(want, want_bias, dy, x, g, 1);
    const Tensor magnitude = empty_like(want), bias_magnitude = empty_like(want_bias);
    cpu.conv2d.backward_weight_bias(magnitude, bias_magnitude, dy.abs(), x.abs(), g, 1);
    // A BFloat16 rounding of the exact value (2^-9 of it, doubled) and Float32 sums of a chunk's terms.
    const auto within = [](const Tensor& got, const Tensor& exact, const Tensor& terms) {
      const Tensor bound = exact.abs() * std::ldexp(1.0, -8) + terms * std::ldexp(1.0, -16);
      return (got.to(kFloat64).reshape(exact.sizes()) - exact).abs().le(bound).all().item<bool>();
    };
    EXPECT_TRUE(within(grad_weight, want, magnitude)) << k.name();
    EXPECT_TRUE(within(grad_bias, want_bias, bias_magnitude)) << k.name();
    EXPECT_GT(want.abs().sum().item<double>(), 0.0) << k.name();
  }
}

TEST_F(WeightGradientPairs, GivesTheSameBitsFromBlocksAndNchwAndOnAnyThreadCount) {
  manual_seed(4);
  const Case k{19, 32, 64, 14, 14, 3, 1, 1};  // three chunks of up to 8 images, the last short
  const Im2ColGeometry g = k.geometry();
  const Tensor input = relu(randn({k.n, k.c, k.h, k.w})).to(kBFloat16);
  const Tensor grad_output = randn({k.n, k.o, g.out_h, g.out_w}).to(kBFloat16);
  const auto gradients = [&](const Tensor& x, const ChannelBlockedLayout& x_layout, const Tensor& dy,
                             const ChannelBlockedLayout& dy_layout) {
    const Tensor dw = empty({k.o, k.c, 3, 3}, TensorOptions().dtype(kBFloat16));
    const Tensor db = empty({k.o}, TensorOptions().dtype(kBFloat16));
    EXPECT_TRUE(cpu::conv2d_weight_gradient_in_pairs(dw, db, dy, dy_layout, x, x_layout, g));
    return std::pair{dw, db};
  };
  const auto [dw, db] = gradients(input, {}, grad_output, {});
  const Tensor blocked_input = to_blocks(input), blocked_grad = to_blocks(grad_output).view({-1});
  const auto [dw_blocks, db_blocks] =
      gradients(blocked_input, blocks_of(input), blocked_grad, blocks_of(grad_output));
  EXPECT_TRUE(testing::same_bytes(dw_blocks, dw));
  EXPECT_TRUE(testing::same_bytes(db_blocks, db));
  const auto [dw_mixed, db_mixed] = gradients(input, {}, blocked_grad, blocks_of(grad_output));
  EXPECT_TRUE(testing::same_bytes(dw_mixed, dw));
  EXPECT_TRUE(testing::same_bytes(db_mixed, db));

  const int threads = get_num_threads();
  set_num_threads(1);
  const auto [dw_one, db_one] = gradients(input, {}, grad_output, {});
  set_num_threads(threads);
  EXPECT_TRUE(testing::same_bytes(dw_one, dw));
  EXPECT_TRUE(testing::same_bytes(db_one, db));
}

TEST_F(WeightGradientPairs, GroupsOfChunksGiveTheSameBitsOnAnyThreadCount) {
  // 75 small images: 10 chunks of 8 (the last of 3) in 8 groups, two of them of two chunks.
  manual_seed(6);
  const Case k{75, 16, 16, 6, 6, 3, 1, 1};
  const Im2ColGeometry g = k.geometry();
  const Tensor input = relu(randn({k.n, k.c, k.h, k.w})).to(kBFloat16);
  const Tensor grad_output = randn({k.n, k.o, g.out_h, g.out_w}).to(kBFloat16);
  const int threads = get_num_threads();
  std::vector<Tensor> results;
  for (const int n : {1, 2, 3}) {
    set_num_threads(n);
    const Tensor dw = empty({k.o, k.c, 3, 3}, TensorOptions().dtype(kBFloat16));
    const Tensor db = empty({k.o}, TensorOptions().dtype(kBFloat16));
    EXPECT_TRUE(cpu::conv2d_weight_gradient_in_pairs(dw, db, grad_output, {}, input, {}, g));
    results.push_back(cat({dw.view({-1}), db}));
  }
  set_num_threads(threads);
  EXPECT_TRUE(testing::same_bytes(results[1], results[0]));
  EXPECT_TRUE(testing::same_bytes(results[2], results[0]));

  const Tensor want = empty({k.o, k.c, 3, 3}, TensorOptions().dtype(kFloat64));
  const Tensor want_bias = empty({1, k.o, 1, 1}, TensorOptions().dtype(kFloat64));
  registered_kernels(DeviceType::CPU)
      .conv2d.backward_weight_bias(want, want_bias, grad_output.to(kFloat64), input.to(kFloat64), g, 1);
  const Tensor exact = cat({want.view({-1}), want_bias.view({-1})});
  const Tensor error = (results[0].to(kFloat64) - exact).abs();
  EXPECT_TRUE(error.le(exact.abs() * std::ldexp(1.0, -8) + 1e-3).all().item<bool>())
      << "largest error " << error.max().item<double>();
}

TEST_F(WeightGradientPairs, IsTheEagerOpsAndTheFusedBackwardsRoute) {
  if (!backends::onednn_has_bf16()) GTEST_SKIP() << "the route is oneDNN's BFloat16 one";
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  manual_seed(5);
  const Case k{10, 32, 48, 12, 12, 3, 1, 1};
  const Im2ColGeometry g = k.geometry();
  const TensorOptions bf16 = TensorOptions().dtype(kBFloat16);
  const Tensor input = relu(randn({k.n, k.c, k.h, k.w})).to(kBFloat16);
  const Tensor grad_output = randn({k.n, k.o, g.out_h, g.out_w}).to(kBFloat16);
  const Tensor want = empty({k.o, k.c, 3, 3}, bf16), want_bias = empty({k.o}, bf16);
  ASSERT_TRUE(cpu::conv2d_weight_gradient_in_pairs(want, want_bias, grad_output, {}, input, {}, g));

  const Tensor dw = empty_like(want), db = empty({1, k.o, 1, 1}, bf16), dw_alone = empty_like(want);
  cpu.conv2d.backward_weight_bias(dw, db, grad_output, input, g, 1);
  cpu.conv2d.backward_weight(dw_alone, grad_output, input, g, 1);
  EXPECT_TRUE(testing::same_bytes(dw, want));
  EXPECT_TRUE(testing::same_bytes(db.view({-1}), want_bias));
  EXPECT_TRUE(testing::same_bytes(dw_alone, want));

  // Through a 2x2 pool: the fused backward unpools into the primitives' layout and reads the
  // input in NCHW and in blocks, as the eager ops read the unpooled gradient.
  const Im2ColGeometry pool = ops::im2col_geometry({k.n, k.o, g.out_h, g.out_w}, {2, 2}, {1, 1}, {0, 0}, {2, 2});
  const Tensor weight = (randn({k.o, k.c, 3, 3}) * 0.1).to(kBFloat16), bias = randn({k.o}).to(kBFloat16);
  const Tensor values = empty({k.n, k.o, pool.out_h, pool.out_w}, bf16);
  const Tensor indices = empty(values.sizes(), TensorOptions().dtype(kInt64));
  const Tensor conv = empty({k.n, k.o, g.out_h, g.out_w}, bf16);
  cpu.conv2d.forward_relu(conv, input, weight, bias, g, 1);
  cpu.max_pool2d(values, indices, conv, pool);
  const Tensor grad_pooled = randn(values.sizes()).to(kBFloat16), unpooled = empty_like(conv);
  cpu.max_pool2d_backward_relu(unpooled, grad_pooled, indices, values);
  cpu.conv2d.backward_weight_bias(dw, db, unpooled, input, g, 1);
  for (const bool blocked : {false, true}) {
    const Tensor grad_input = blocked ? empty({k.n, k.c / 16, k.h, k.w, 16}, bf16) : empty_like(input);
    const Tensor fused = empty_like(want), fused_bias = empty_like(db);
    cpu.conv2d.backward_through_max_pool(grad_input, fused, fused_bias, grad_pooled, indices, values, weight,
                                         blocked ? to_blocks(input) : input, g, 1);
    EXPECT_TRUE(testing::same_bytes(fused, dw)) << (blocked ? "blocked" : "NCHW");
    EXPECT_TRUE(testing::same_bytes(fused_bias, db)) << (blocked ? "blocked" : "NCHW");
  }
}

TEST_F(WeightGradientPairs, RefusesWhatItDoesNotServe) {
  const auto serves = [&](std::int64_t c, std::int64_t o, std::int64_t w, std::int64_t kernel_w, std::int64_t stride,
                          DType dtype) {
    const Im2ColGeometry g = ops::im2col_geometry({2, c, 8, w}, {3, kernel_w}, {1, 1}, {1, 1}, {stride, stride});
    const Tensor input = zeros({2, c, 8, w}, TensorOptions().dtype(dtype));
    const Tensor grad_output = zeros({2, o, g.out_h, g.out_w}, TensorOptions().dtype(dtype));
    const Tensor grad_weight = empty({o, c, 3, kernel_w}, TensorOptions().dtype(dtype));
    return cpu::conv2d_weight_gradient_in_pairs(grad_weight, Tensor(), grad_output, {}, input, {}, g);
  };
  EXPECT_TRUE(serves(16, 16, 8, 3, 1, kBFloat16));
  EXPECT_FALSE(serves(16, 16, 8, 3, 1, kFloat32)) << "Float32";
  EXPECT_FALSE(serves(16, 16, 7, 3, 1, kBFloat16)) << "an odd output width";
  EXPECT_FALSE(serves(8, 16, 8, 3, 1, kBFloat16)) << "8 input channels";
  EXPECT_FALSE(serves(16, 24, 8, 3, 1, kBFloat16)) << "24 output channels";
  EXPECT_FALSE(serves(16, 16, 8, 5, 1, kBFloat16)) << "a kernel 5 wide";
  EXPECT_FALSE(serves(16, 16, 8, 3, 2, kBFloat16)) << "stride 2";
  EXPECT_FALSE(serves(16, 16, 2048, 3, 1, kBFloat16)) << "an image whose packs do not fit a chunk";

  // Two groups: each weight sees 16 of the input's 32 channels, in NCHW and in channel blocks.
  const Im2ColGeometry g = ops::im2col_geometry({2, 32, 8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  const TensorOptions bf16 = TensorOptions().dtype(kBFloat16);
  const Tensor input = zeros({2, 32, 8, 8}, bf16), grad_output = zeros({2, 32, 8, 8}, bf16);
  const Tensor grad_weight = empty({32, 16, 3, 3}, bf16);
  EXPECT_FALSE(cpu::conv2d_weight_gradient_in_pairs(grad_weight, Tensor(), grad_output, {}, input, {}, g))
      << "a grouped convolution, NCHW";
  EXPECT_FALSE(cpu::conv2d_weight_gradient_in_pairs(grad_weight, Tensor(), to_blocks(grad_output).view({-1}),
                                                    blocks_of(grad_output), to_blocks(input), blocks_of(input), g))
      << "a grouped convolution, in channel blocks";
}

}  // namespace
}  // namespace kiln
