// tests/core/test_pool.cpp — the CPU max-pool kernel against a direct reading of the
// definition: every window scanned in row-major order, the first strict maximum kept, the
// first NaN winning for good, padding never chosen. The kernel has a separable fast path
// (windows that tile the rows) and a window-at-a-time path; geometries below exercise both,
// on data with many ties so the tie order is checked, not just the values. Its backward is
// checked the same way: each window's gradient added onto the winner. The kernels that pool
// oneDNN's channel-blocked layout (compiled steps) are checked against the plain ones.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/cpu/cpu_kernels.h"
#include "core/cpu/pool_record.h"
#include "core/ops/conv.h"
#include "kiln.h"
#include "support/test_util.h"

namespace kiln {
namespace {

struct PoolCase {
  const char* name;
  std::int64_t h, w, kh, kw, sh, sw, ph, pw, dh, dw;
};

/// max_pool2d by the definition, one window at a time, in Float64.
std::pair<std::vector<double>, std::vector<std::int64_t>> reference(const std::vector<double>& x, std::int64_t planes,
                                                                    const Im2ColGeometry& g) {
  std::vector<double> values;
  std::vector<std::int64_t> indices;
  for (std::int64_t p = 0; p < planes; ++p) {
    const double* plane = x.data() + p * g.height * g.width;
    for (std::int64_t oy = 0; oy < g.out_h; ++oy) {
      for (std::int64_t ox = 0; ox < g.out_w; ++ox) {
        double best = 0;
        std::int64_t at = -1;
        for (std::int64_t i = 0; i < g.kernel_h; ++i) {
          for (std::int64_t j = 0; j < g.kernel_w; ++j) {
            const std::int64_t y = oy * g.stride_h - g.pad_h + i * g.dilation_h;
            const std::int64_t xx = ox * g.stride_w - g.pad_w + j * g.dilation_w;
            if (y < 0 || y >= g.height || xx < 0 || xx >= g.width) continue;
            const double v = plane[y * g.width + xx];
            const bool first = at < 0;
            if (first || (!std::isnan(best) && (v > best || std::isnan(v)))) {
              best = v;
              at = y * g.width + xx;
            }
          }
        }
        values.push_back(best);
        indices.push_back(at);
      }
    }
  }
  return {values, indices};
}

class MaxPoolKernel : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolKernel, MatchesTheDefinitionIncludingTiesAndNaN) {
  const PoolCase c = GetParam();
  const std::int64_t n = 2, channels = 3;
  manual_seed(7);
  // Small integers: most windows hold ties. A few NaNs and -infs on top.
  Tensor x = randint(0, 4, {n, channels, c.h, c.w}).to(kFloat64);
  std::vector<double> data(x.data_ptr<double>(), x.data_ptr<double>() + x.numel());
  for (std::size_t i = 0; i < data.size(); i += 23) data[i] = std::numeric_limits<double>::quiet_NaN();
  for (std::size_t i = 5; i < data.size(); i += 17) data[i] = -std::numeric_limits<double>::infinity();
  const Im2ColGeometry g = ops::im2col_geometry({n, channels, c.h, c.w}, {c.kh, c.kw}, {c.dh, c.dw}, {c.ph, c.pw}, {c.sh, c.sw});
  const auto [want_values, want_indices] = reference(data, n * channels, g);
  for (DType dtype : {kFloat64, kFloat32}) {
    Tensor input = tensor(data).reshape({n, channels, c.h, c.w}).to(dtype);
    const auto [values, indices] = ops::max_pool2d_with_indices(input, g);
    ASSERT_EQ(values.numel(), static_cast<std::int64_t>(want_values.size()));
    Tensor v = values.to(kFloat64).contiguous();
    for (std::int64_t i = 0; i < values.numel(); ++i) {
      const double got = v.data_ptr<double>()[i];
      if (std::isnan(want_values[static_cast<std::size_t>(i)])) {
        EXPECT_TRUE(std::isnan(got)) << c.name << " output " << i;
      } else {
        EXPECT_EQ(got, want_values[static_cast<std::size_t>(i)]) << c.name << " output " << i;
      }
      EXPECT_EQ(indices.data_ptr<std::int64_t>()[i], want_indices[static_cast<std::size_t>(i)])
          << c.name << " output " << i << " (" << dtype_name(dtype) << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Geometries, MaxPoolKernel,
    ::testing::Values(PoolCase{"tiling_2x2_stride_2", 8, 10, 2, 2, 2, 2, 0, 0, 1, 1},
                      PoolCase{"tiling_1x2_stride_1x2_tall", 5, 6, 3, 2, 1, 2, 0, 0, 1, 1},
                      PoolCase{"tiling_kernel_1_stride_1", 4, 5, 1, 1, 1, 1, 0, 0, 1, 1},
                      PoolCase{"odd_width_2x2_stride_2", 7, 7, 2, 2, 2, 2, 0, 0, 1, 1},
                      PoolCase{"overlapping_3x3_stride_1", 6, 7, 3, 3, 1, 1, 0, 0, 1, 1},
                      PoolCase{"padded_3x3_stride_2", 7, 8, 3, 3, 2, 2, 1, 1, 1, 1},
                      PoolCase{"dilated_2x2", 9, 9, 2, 2, 1, 1, 0, 0, 2, 3},
                      PoolCase{"dilated_tiling", 6, 8, 2, 2, 2, 2, 0, 0, 2, 1},
                      PoolCase{"padded_dilated", 6, 6, 3, 2, 2, 1, 1, 1, 2, 2}),
    [](const ::testing::TestParamInfo<PoolCase>& info) { return std::string(info.param.name); });

/// max_pool2d's backward by the definition: each output gradient added onto its winner.
std::vector<double> reference_backward(const std::vector<double>& grad_output, const std::vector<std::int64_t>& winners,
                                       std::int64_t planes, const Im2ColGeometry& g) {
  std::vector<double> grad_input(static_cast<std::size_t>(planes * g.height * g.width), 0.0);
  const std::int64_t plane_out = g.out_h * g.out_w;
  for (std::int64_t o = 0; o < planes * plane_out; ++o) {
    const std::int64_t plane = o / plane_out;
    grad_input[static_cast<std::size_t>(plane * g.height * g.width + winners[static_cast<std::size_t>(o)])] +=
        grad_output[static_cast<std::size_t>(o)];
  }
  return grad_input;
}

TEST_P(MaxPoolKernel, BackwardAddsEachWindowsGradientOntoItsWinner) {
  const PoolCase c = GetParam();
  const std::int64_t n = 2, channels = 3;
  manual_seed(8);
  // Ties everywhere, so overlapping windows often share a winner.
  Tensor x = randint(0, 3, {n, channels, c.h, c.w}).to(kFloat64);
  const Im2ColGeometry g = ops::im2col_geometry({n, channels, c.h, c.w}, {c.kh, c.kw}, {c.dh, c.dw}, {c.ph, c.pw}, {c.sh, c.sw});
  const auto [values, indices] = ops::max_pool2d_with_indices(x, g);
  const Tensor grad_output = randn(values.sizes(), TensorOptions().dtype(kFloat64));
  const std::vector<double> want = reference_backward(
      std::vector<double>(grad_output.data_ptr<double>(), grad_output.data_ptr<double>() + grad_output.numel()),
      std::vector<std::int64_t>(indices.data_ptr<std::int64_t>(), indices.data_ptr<std::int64_t>() + indices.numel()),
      n * channels, g);
  for (DType dtype : {kFloat64, kFloat32}) {
    const Tensor got = ops::max_pool2d_with_indices_backward(grad_output.to(dtype), indices, x.sizes()).to(kFloat64);
    ASSERT_EQ(got.sizes(), x.sizes());
    const double tolerance = dtype == kFloat64 ? 0.0 : 1e-6;
    for (std::int64_t i = 0; i < got.numel(); ++i) {
      EXPECT_NEAR(got.data_ptr<double>()[i], want[static_cast<std::size_t>(i)], tolerance)
          << c.name << " element " << i << " (" << dtype_name(dtype) << ")";
    }
  }
}

/// `x` [N, C, H, W] in oneDNN's channel-blocked layout of `block` lanes ([N, C/block, H, W,
/// block], the last block zero-padded), and where that layout puts each element.
std::pair<Tensor, ChannelBlockedLayout> channel_blocked(const Tensor& x, std::int64_t block) {
  const std::int64_t n = x.sizes()[0], c = x.sizes()[1], h = x.sizes()[2], w = x.sizes()[3];
  const std::int64_t padded = (c + block - 1) / block * block;
  const Tensor plain = zeros({n, padded, h, w}, TensorOptions().dtype(x.dtype()));
  plain.narrow(1, 0, c).copy_(x);
  const Tensor blocked = plain.view({n, padded / block, block, h, w}).permute({0, 1, 3, 4, 2}).contiguous();
  return {blocked.view({-1}), ChannelBlockedLayout{block, padded * h * w, block * h * w, block * w, block, blocked.numel()}};
}

TEST_P(MaxPoolKernel, TheChannelBlockedKernelsAreThePlainOnesBitForBit) {
  // The same values, indices and gradients as the NCHW kernels (Note [A convolution's blocked
  // output pooled where it lies]), with a channel count that leaves the last block padded.
  const PoolCase c = GetParam();
  const std::int64_t n = 2, channels = 20;
  manual_seed(9);
  const Im2ColGeometry g = ops::im2col_geometry({n, channels, c.h, c.w}, {c.kh, c.kw}, {c.dh, c.dw}, {c.ph, c.pw}, {c.sh, c.sw});
  for (const DType dtype : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    // Ties, zeros and negatives (relu's backward stops at a window whose value is not positive), and NaNs.
    Tensor x = randint(-1, 3, {n, channels, c.h, c.w}).to(dtype);
    for (std::int64_t i = 11; i < x.numel(); i += 37) x.view({-1}).narrow(0, i, 1).fill_(std::nan(""));
    const TensorOptions options = TensorOptions().dtype(dtype);
    const Tensor values = empty({n, channels, g.out_h, g.out_w}, options);
    const Tensor indices = empty({n, channels, g.out_h, g.out_w}, TensorOptions().dtype(kInt64));
    cpu::max_pool2d_kernel(values, indices, x, g);
    const Tensor grad_output = randn(values.sizes()).to(dtype);
    for (const std::int64_t block : {8, 16}) {
      const auto [blocked, layout] = channel_blocked(x, block);
      const std::string what = std::string(c.name) + ", " + dtype_name(dtype) + ", block " + std::to_string(block);
      // Of x, and of relu(x) with relu applied as the kernel reads (a convolution's fused relu).
      for (const bool relu : {false, true}) {
        const Tensor want_values = empty_like(values), want_indices = empty_like(indices);
        cpu::max_pool2d_kernel(want_values, want_indices, relu ? x.relu() : x, g);
        const Tensor got_values = empty_like(values), got_indices = empty_like(indices);
        cpu::max_pool2d_channel_blocked_kernel(got_values, got_indices, blocked, layout, g, relu);
        const Tensor nan = want_values.ne(want_values);
        EXPECT_GT(nan.sum().item<double>(), 0) << what;
        EXPECT_TRUE(equal(got_values.ne(got_values), nan)) << what << (relu ? ", relu" : "");
        EXPECT_TRUE(equal(got_values.masked_fill(nan, 0.0), want_values.masked_fill(nan, 0.0)))
            << what << (relu ? ", relu" : "");
        EXPECT_TRUE(equal(got_indices, want_indices)) << what << (relu ? ", relu" : "");
        if (relu && cpu::pools_whole_2x2_windows(g)) {
          // With window records instead of indices, forward and backward.
          const Tensor record_values = empty_like(values), records = empty(values.sizes(), TensorOptions().dtype(kUInt8));
          cpu::max_pool2d_channel_blocked_kernel(record_values, records, blocked, layout, g, relu);
          EXPECT_TRUE(equal(record_values.masked_fill(nan, 0.0), want_values.masked_fill(nan, 0.0))) << what << ", records";
          const Tensor want_records = empty_like(records);
          cpu::pool_records_from_indices(want_records, want_indices, want_values, c.w);
          EXPECT_TRUE(equal(records, want_records)) << what << ", records";
          const Tensor plain_grad = empty_like(x);
          cpu::max_pool2d_backward_relu_kernel(plain_grad, grad_output, want_indices, want_values);
          const Tensor got_grad = full({layout.elements}, 7.0, options);
          cpu::max_pool2d_backward_relu_channel_blocked_kernel(got_grad, layout, grad_output, records, Tensor(), g);
          EXPECT_TRUE(equal(got_grad, channel_blocked(plain_grad, block).first)) << what << ", records";
        }
      }
      for (const bool relu : {true, false}) {
        const Tensor plain_grad = empty_like(x);
        if (relu) {
          cpu::max_pool2d_backward_relu_kernel(plain_grad, grad_output, indices, values);
        } else {
          cpu::max_pool2d_backward_kernel(plain_grad, grad_output, indices);
        }
        const Tensor got_grad = full({layout.elements}, 7.0, options);  // the kernel writes every lane
        cpu::max_pool2d_backward_relu_channel_blocked_kernel(got_grad, layout, grad_output, indices,
                                                             relu ? values : Tensor(), g);
        EXPECT_TRUE(equal(got_grad, channel_blocked(plain_grad, block).first)) << what << (relu ? ", relu" : "");
      }
    }
  }
}

TEST(MaxPoolChannelBlocked, The2x2KernelsWriteTheBitsThePlainOnesWrite) {
  // The whole-window kernels that pool and unpool a block's lanes as vectors (compiled CNN
  // steps) against the plain kernels, byte for byte: a gradient of -0 lands as +0 (the sum +0
  // + -0), and a NaN with a payload is stored as the quiet NaN from_op_math makes of it.
  const std::int64_t n = 2, channels = 20, h = 6, w = 6;
  const Im2ColGeometry g = ops::im2col_geometry({n, channels, h, w}, {2, 2}, {1, 1}, {0, 0}, {2, 2});
  ASSERT_TRUE(cpu::pools_whole_2x2_windows(g));
  manual_seed(11);
  for (const DType dtype : {kFloat32, kBFloat16}) {
    const TensorOptions options = TensorOptions().dtype(dtype);
    Tensor x = randint(-1, 3, {n, channels, h, w}).to(dtype);
    for (std::int64_t i = 3; i < x.numel(); i += 29) testing::set_bits(x, i, 0x7f810000u);   // a signalling NaN
    for (std::int64_t i = 17; i < x.numel(); i += 43) testing::set_bits(x, i, 0xffc50000u);  // a negative quiet one
    const Tensor values = empty({n, channels, g.out_h, g.out_w}, options);
    const Tensor indices = empty(values.sizes(), TensorOptions().dtype(kInt64));
    cpu::max_pool2d_kernel(values, indices, x.relu(), g);
    Tensor grad_output = randn(values.sizes()).to(dtype);
    for (std::int64_t i = 0; i < grad_output.numel(); i += 5) testing::set_bits(grad_output, i, 0x80000000u);  // -0
    for (std::int64_t i = 2; i < grad_output.numel(); i += 31) testing::set_bits(grad_output, i, 0x7f820000u);
    const Tensor plain_grad = empty_like(x);
    cpu::max_pool2d_backward_relu_kernel(plain_grad, grad_output, indices, values);
    for (const std::int64_t block : {8, 16}) {
      const std::string what = std::string(dtype_name(dtype)) + ", block " + std::to_string(block);
      const auto [blocked, layout] = channel_blocked(x, block);
      const Tensor got_values = empty_like(values), records = empty(values.sizes(), TensorOptions().dtype(kUInt8));
      cpu::max_pool2d_channel_blocked_kernel(got_values, records, blocked, layout, g, /*relu=*/true);
      EXPECT_TRUE(testing::same_bytes(got_values, values)) << what;
      const Tensor got_grad = full({layout.elements}, 7.0, options);
      cpu::max_pool2d_backward_relu_channel_blocked_kernel(got_grad, layout, grad_output, records, Tensor(), g);
      EXPECT_TRUE(testing::same_bytes(got_grad, channel_blocked(plain_grad, block).first)) << what;
    }
  }
}

TEST_P(MaxPoolKernel, TheChannelsLastKernelsAreThePlainOnesBitForBit) {
  // Channels-last (nhwc, what oneDNN's AMX BFloat16 convolutions write) described as blocks of
  // 16 lanes that follow each other within a pixel: the same values, indices and gradients.
  const PoolCase c = GetParam();
  const std::int64_t n = 2, channels = 32;
  manual_seed(10);
  const Im2ColGeometry g = ops::im2col_geometry({n, channels, c.h, c.w}, {c.kh, c.kw}, {c.dh, c.dw}, {c.ph, c.pw}, {c.sh, c.sw});
  for (const DType dtype : {kFloat32, kBFloat16}) {
    Tensor x = randint(-1, 3, {n, channels, c.h, c.w}).to(dtype);
    for (std::int64_t i = 5; i < x.numel(); i += 41) x.view({-1}).narrow(0, i, 1).fill_(std::nan(""));
    const Tensor nhwc = x.permute({0, 2, 3, 1}).contiguous().view({-1});
    const ChannelBlockedLayout layout{16, c.h * c.w * channels, 16, c.w * channels, channels, nhwc.numel()};
    const std::string what = std::string(c.name) + ", " + dtype_name(dtype);
    const TensorOptions options = TensorOptions().dtype(dtype);
    const Tensor values = empty({n, channels, g.out_h, g.out_w}, options);
    const Tensor indices = empty(values.sizes(), TensorOptions().dtype(kInt64));
    cpu::max_pool2d_kernel(values, indices, x.relu(), g);
    const Tensor got_values = empty_like(values), got_indices = empty_like(indices);
    cpu::max_pool2d_channel_blocked_kernel(got_values, got_indices, nhwc, layout, g, /*relu=*/true);
    const Tensor nan = values.ne(values);
    EXPECT_GT(nan.sum().item<double>(), 0) << what;
    EXPECT_TRUE(equal(got_values.ne(got_values), nan)) << what;
    EXPECT_TRUE(equal(got_values.masked_fill(nan, 0.0), values.masked_fill(nan, 0.0))) << what;
    EXPECT_TRUE(equal(got_indices, indices)) << what;
    const Tensor grad_output = randn(values.sizes()).to(dtype), plain_grad = empty_like(x);
    cpu::max_pool2d_backward_relu_kernel(plain_grad, grad_output, indices, values);
    const Tensor got_grad = full({layout.elements}, 7.0, options);
    cpu::max_pool2d_backward_relu_channel_blocked_kernel(got_grad, layout, grad_output, indices, values, g);
    EXPECT_TRUE(equal(got_grad, plain_grad.permute({0, 2, 3, 1}).contiguous().view({-1}))) << what;
  }
}

TEST(MaxPoolBackward, AnIndexOutsideItsPlaneIsAnIndexError) {
  const Tensor grad_output = ones({1, 2, 2, 2});
  Tensor indices = zeros({1, 2, 2, 2}, TensorOptions().dtype(kInt64));
  indices.data_ptr<std::int64_t>()[5] = 16;  // a 4x4 plane has positions 0..15
  EXPECT_THROW(ops::max_pool2d_with_indices_backward(grad_output, indices, {1, 2, 4, 4}), IndexError);
  indices.data_ptr<std::int64_t>()[5] = -1;
  EXPECT_THROW(ops::max_pool2d_with_indices_backward(grad_output, indices, {1, 2, 4, 4}), IndexError);
  indices.data_ptr<std::int64_t>()[5] = 15;
  const Tensor grad_input = ops::max_pool2d_with_indices_backward(grad_output, indices, {1, 2, 4, 4});
  EXPECT_EQ(grad_input[0][0][0][0].item<double>(), 4.0);  // plane 0: all four windows at 0
  EXPECT_EQ(grad_input[0][1][0][0].item<double>(), 3.0);  // plane 1: three at 0, one at 15
  EXPECT_EQ(grad_input[0][1][3][3].item<double>(), 1.0);
}

TEST(MaxPoolBackward, MismatchedShapesAreAnError) {
  EXPECT_THROW(ops::max_pool2d_with_indices_backward(ones({1, 2, 2, 2}), zeros({1, 2, 2, 3}, TensorOptions().dtype(kInt64)),
                                                     {1, 2, 4, 4}),
               Error);
  EXPECT_THROW(ops::max_pool2d_with_indices_backward(ones({1, 2, 2, 2}), zeros({1, 2, 2, 2}), {1, 2, 4, 4}), Error);
}

}  // namespace
}  // namespace kiln
