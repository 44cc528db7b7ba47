// tests/compile/test_channel_blocks.cpp — activations held in channel blocks (Note [Channel
// blocks across a layer boundary]) and propagate_channel_blocks (Note [Layouts that flow between
// layers]): each fused kernel that writes or reads an activation in channel blocks computes,
// bit for bit, what it computes in NCHW; the pass holds train_cnn's first activation and its
// gradient blocked, three reorders leave the step and its results keep every bit; a value that
// something else also reads stays in NCHW.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "../../examples/support/models.h"
#include "compile/capture.h"
#include "compiled_training.h"
#include "compile/passes.h"
#include "core/backends.h"
#include "core/cpu/channel_blocks.h"
#include "core/cpu/conv_weight_gradient_pairs.h"
#include "core/cpu/pool_record.h"
#include "core/onednn/onednn.h"
#include "core/ops/conv.h"
#include "core/routes.h"
#include "support/test_util.h"

namespace kiln {
namespace {

class ChannelBlocks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!backends::onednn_is_available()) GTEST_SKIP() << "channel blocks are oneDNN's layout";
    set_num_threads(get_num_threads());  // same bits only on a fixed thread count
  }
};

/// [N, C, H, W] in NCHW -> the same activation in channel blocks of `block`, and back.
Tensor to_blocks(const Tensor& t, std::int64_t block) {
  const std::int64_t n = t.sizes()[0], c = t.sizes()[1], h = t.sizes()[2], w = t.sizes()[3];
  return t.reshape({n, c / block, block, h, w}).permute({0, 1, 3, 4, 2}).contiguous();
}
Tensor from_blocks(const Tensor& t) {
  const std::int64_t n = t.sizes()[0], cb = t.sizes()[1], h = t.sizes()[2], w = t.sizes()[3], b = t.sizes()[4];
  return t.permute({0, 1, 4, 2, 3}).reshape({n, cb * b, h, w});
}

TEST_F(ChannelBlocks, EachFusedKernelComputesInBlocksWhatItComputesInNchw) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  manual_seed(8);
  const std::int64_t n = 3, c = 32, size = 12, out = 48;
  const Im2ColGeometry conv_g{.channels = 1, .height = size, .width = size, .kernel_h = 3, .kernel_w = 3,
                              .pad_h = 1, .pad_w = 1, .out_h = size, .out_w = size};
  const Im2ColGeometry pool_g{.channels = c, .height = size, .width = size, .kernel_h = 2, .kernel_w = 2,
                              .stride_h = 2, .stride_w = 2, .out_h = size / 2, .out_w = size / 2};
  const std::int64_t h = size / 2;
  const Im2ColGeometry next_g{.channels = c, .height = h, .width = h, .kernel_h = 3, .kernel_w = 3,
                              .pad_h = 1, .pad_w = 1, .out_h = h, .out_w = h};
  const Tensor next_weight = randn({out, c, 3, 3}) * 0.2;
  const std::optional<std::int64_t> block =
      onednn::conv2d_input_channel_block(kFloat32, {n, c, h, h}, next_weight.sizes(), next_g, 1, /*with_bias=*/true);
  ASSERT_TRUE(block.has_value()) << "oneDNN reads a 32-channel input in a dense blocked layout";
  ASSERT_EQ(routes::cpu_conv2d(kFloat32, {c, 1, 3, 3}, 1), routes::Route::Thin);

  // The thin first layer pooled as it is made, its values written in blocks.
  const Tensor x = randn({n, 1, size, size}), w1 = randn({c, 1, 3, 3}), b1 = randn({c});
  x.view({-1}).narrow(0, 17, 1).fill_(std::nan(""));
  const Tensor values = empty({n, c, h, h}), records = empty({n, c, h, h}, kUInt8);
  const Tensor blocked_values = empty({n, c / *block, h, h, *block}), blocked_records = empty_like(records);
  cpu.conv2d.forward_relu_max_pool(values, records, x, w1, b1, conv_g, pool_g, 1);
  cpu.conv2d.forward_relu_max_pool(blocked_values, blocked_records, x, w1, b1, conv_g, pool_g, 1);
  EXPECT_TRUE(testing::same_bits(from_blocks(blocked_values), values));
  EXPECT_TRUE(equal(blocked_records, records));
  EXPECT_GT(values.ne(values).sum().item<double>(), 0) << "a NaN window";

  // oneDNN's layer after it, forward and backward, reading the input in blocks and writing its
  // gradient there.
  const Tensor input = values.masked_fill(values.ne(values), 0.25), blocked_input = to_blocks(input, *block);
  const Tensor next_bias = randn({out});
  const Tensor pooled = empty({n, out, h / 2, h / 2}), pooled_records = empty(pooled.sizes(), kUInt8);
  const Tensor pooled_from_blocks = empty_like(pooled), records_from_blocks = empty_like(pooled_records);
  const Im2ColGeometry next_pool{.channels = out, .height = h, .width = h, .kernel_h = 2, .kernel_w = 2,
                                 .stride_h = 2, .stride_w = 2, .out_h = h / 2, .out_w = h / 2};
  cpu.conv2d.forward_relu_max_pool(pooled, pooled_records, input, next_weight, next_bias, next_g, next_pool, 1);
  cpu.conv2d.forward_relu_max_pool(pooled_from_blocks, records_from_blocks, blocked_input, next_weight, next_bias,
                                   next_g, next_pool, 1);
  EXPECT_TRUE(testing::same_bits(pooled_from_blocks, pooled));
  EXPECT_TRUE(equal(records_from_blocks, pooled_records));
  const Tensor grad_pooled = randn(pooled.sizes());
  const Tensor grad_input = empty_like(input), grad_weight = empty_like(next_weight), grad_bias = empty({1, out, 1, 1});
  const Tensor blocked_grad_input = empty_like(blocked_input), grad_weight2 = empty_like(next_weight);
  const Tensor grad_bias2 = empty_like(grad_bias);
  cpu.conv2d.backward_through_max_pool(grad_input, grad_weight, grad_bias, grad_pooled, pooled_records, pooled,
                                       next_weight, input, next_g, 1);
  cpu.conv2d.backward_through_max_pool(blocked_grad_input, grad_weight2, grad_bias2, grad_pooled, pooled_records,
                                       pooled, next_weight, blocked_input, next_g, 1);
  EXPECT_TRUE(equal(from_blocks(blocked_grad_input), grad_input));
  EXPECT_TRUE(equal(grad_weight2, grad_weight));
  EXPECT_TRUE(equal(grad_bias2, grad_bias));

  // The first layer's weight gradient read through its pool from a gradient in blocks.
  const Tensor dw = empty_like(w1), db = empty({1, c, 1, 1}), dw2 = empty_like(w1), db2 = empty_like(db);
  cpu.conv2d.backward_weight_bias_through_max_pool(dw, db, grad_input, records, values, x, conv_g, 1);
  cpu.conv2d.backward_weight_bias_through_max_pool(dw2, db2, blocked_grad_input, records, blocked_values, x, conv_g,
                                                   1);
  EXPECT_TRUE(testing::same_bits(dw2, dw));
  EXPECT_TRUE(testing::same_bits(db2, db));

  // The thin kernels in channels-last (one block of all C, as oneDNN's AMX BFloat16 kernels read).
  const Tensor last_values = empty({n, 1, h, h, c}), last_records = empty_like(records);
  cpu.conv2d.forward_relu_max_pool(last_values, last_records, x, w1, b1, conv_g, pool_g, 1);
  EXPECT_TRUE(testing::same_bits(from_blocks(last_values), values));
  EXPECT_TRUE(equal(last_records, records));
  const Tensor dw3 = empty_like(w1), db3 = empty_like(db);
  cpu.conv2d.backward_weight_bias_through_max_pool(dw3, db3, to_blocks(grad_input, c), records, last_values, x,
                                                   conv_g, 1);
  EXPECT_TRUE(testing::same_bits(dw3, dw));
  EXPECT_TRUE(testing::same_bits(db3, db));

  // Pooled values in blocks with Int64 indices would need the values read: refused.
  const Tensor indices = empty({n, c, h, h}, kInt64);
  EXPECT_ERROR(cpu.conv2d.backward_weight_bias_through_max_pool(dw2, db2, grad_input, indices, blocked_values, x,
                                                                conv_g, 1),
               "pooled values in channel blocks need window records");
}

// The thin kernels hold output channels in lanes when the pooled side is blocked (Note [Output
// channels in lanes]) and must keep conv_thin.cpp's bits: in each dtype they run on, for 1 and
// 3 input channels, an odd size (a row and a column no window covers) and a row stride, with
// finite inputs (a NaN makes every weight gradient NaN, which hides the sums).
TEST_F(ChannelBlocks, TheThinKernelsComputeInLanesWhatTheyComputeInNchw) {
  // Two threads: the lanes' weight gradient runs one vector of 16 channels a thread, and with
  // more threads than vectors the one-channel-a-thread kernel takes over.
  set_num_threads(2);
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  const std::int64_t n = 3, c = 32;
  for (const DType dtype : {kFloat32, kBFloat16}) {
    for (const std::int64_t channels_in : {1, 3}) {
      for (const std::int64_t size : {12, 13}) {
        for (const std::int64_t stride_h : {1, 2}) {
          const std::string what = std::string(dtype_name(dtype)) + ", " + std::to_string(channels_in) + " in, " +
                                   std::to_string(size) + "x" + std::to_string(size) + ", row stride " +
                                   std::to_string(stride_h);
          manual_seed(size * 10 + channels_in + stride_h);
          const std::int64_t out_h = (size - 1) / stride_h + 1, out_w = size;
          const Im2ColGeometry conv_g{.channels = channels_in, .height = size, .width = size, .kernel_h = 3,
                                      .kernel_w = 3, .pad_h = 1, .pad_w = 1, .stride_h = stride_h,
                                      .out_h = out_h, .out_w = out_w};
          const Im2ColGeometry pool_g{.channels = c, .height = out_h, .width = out_w, .kernel_h = 2, .kernel_w = 2,
                                      .stride_h = 2, .stride_w = 2, .out_h = out_h / 2, .out_w = out_w / 2};
          const std::int64_t ph = pool_g.out_h, pw = pool_g.out_w;
          ASSERT_EQ(routes::cpu_conv2d(dtype, {c, channels_in, 3, 3}, 1), routes::Route::Thin) << what;
          const Tensor x = randn({n, channels_in, size, size}).to(dtype);
          const Tensor w = (randn({c, channels_in, 3, 3}) * 0.5).to(dtype), b = randn({c}).to(dtype);
          const Tensor values = empty({n, c, ph, pw}, dtype), records = empty({n, c, ph, pw}, kUInt8);
          cpu.conv2d.forward_relu_max_pool(values, records, x, w, b, conv_g, pool_g, 1);
          const Tensor grad = randn({n, c, ph, pw}).to(dtype);
          const Tensor dw = empty_like(w), db = empty({1, c, 1, 1}, dtype);
          cpu.conv2d.backward_weight_bias_through_max_pool(dw, db, grad, records, values, x, conv_g, 1);
          ASSERT_EQ(dw.ne(dw).sum().item<double>(), 0) << what;
          for (const std::int64_t block : {std::int64_t{16}, c}) {
            const Tensor blocked_values = empty({n, c / block, ph, pw, block}, dtype);
            const Tensor blocked_records = empty_like(records);
            cpu.conv2d.forward_relu_max_pool(blocked_values, blocked_records, x, w, b, conv_g, pool_g, 1);
            EXPECT_TRUE(testing::same_bytes(from_blocks(blocked_values), values)) << what << ", block " << block;
            EXPECT_TRUE(equal(blocked_records, records)) << what << ", block " << block;
            const Tensor dw2 = empty_like(dw), db2 = empty_like(db);
            cpu.conv2d.backward_weight_bias_through_max_pool(dw2, db2, to_blocks(grad, block), records,
                                                             blocked_values, x, conv_g, 1);
            EXPECT_TRUE(testing::same_bits(dw2, dw)) << what << ", block " << block;
            EXPECT_TRUE(testing::same_bits(db2, db)) << what << ", block " << block;
            // NaN pixels, one with a payload and one negative: their windows pool NaN by the
            // first-NaN rule, stored as T's quiet NaN of its sign.
            const Tensor nan_x = x.clone();
            testing::set_bits(nan_x, size + 4, 0x7fa10000u);
            testing::set_bits(nan_x, 3 * size + 9, 0xffc20000u);
            const Tensor nan_values = empty_like(values), nan_records = empty_like(records);
            cpu.conv2d.forward_relu_max_pool(nan_values, nan_records, nan_x, w, b, conv_g, pool_g, 1);
            cpu.conv2d.forward_relu_max_pool(blocked_values, blocked_records, nan_x, w, b, conv_g, pool_g, 1);
            EXPECT_TRUE(testing::same_bytes(from_blocks(blocked_values), nan_values)) << what << ", NaN, block " << block;
            EXPECT_TRUE(equal(blocked_records, nan_records)) << what << ", NaN, block " << block;
            EXPECT_GT(nan_values.ne(nan_values).sum().item<double>(), 0) << what;
          }
        }
      }
    }
  }
}

/// A thin first layer of 16 channels and a oneDNN one after it; with `also_read`, the first
/// layer's pooled output has one more reader than the second layer.
struct TwoLayerCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc;
  bool also_read;
  explicit TwoLayerCnn(bool also_read) : Module("TwoLayerCnn"), also_read(also_read) {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 16, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(16, 32, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    fc = register_module("fc", std::make_shared<nn::Linear>(32 * 3 * 3, 5));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h1 = max_pool2d(conv1->forward(x).relu(), {2, 2});
    const Tensor out = fc->forward(max_pool2d(conv2->forward(h1).relu(), {2, 2}).flatten(1));
    return also_read ? out + h1.mean({1, 2, 3}).unsqueeze(1) : out;
  }
};

bool holds_blocks(const Tensor& t) { return cpu::holds_channel_blocks(t); }

const char* kEveryOtherPass =
    "eliminate_common_subexpressions,fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,fuse_linear,"
    "fuse_conv_bias_backward,fuse_unpool_weight_gradient,fuse_unpool_conv_backward,record_pool_windows,"
    "fold_constants,plan_memory";

TEST_F(ChannelBlocks, TrainCnnsFirstActivationAndItsGradientCrossInBlocks) {
  // Float32 (nChw16c, or nChw8c on AVX2), and BFloat16 where oneDNN has it (nhwc with AMX).
  for (const DType dtype : {kFloat32, kBFloat16}) {
    if (dtype == kBFloat16 && !backends::onednn_has_bf16()) continue;
    const testing::CompiledRun plain =
        testing::train_compiled<examples::Cnn>(kEveryOtherPass, dtype, {16, 1, 28, 28}, 10, holds_blocks);
    const testing::CompiledRun blocked = testing::train_compiled<examples::Cnn>(
        std::string(kEveryOtherPass) + ",propagate_channel_blocks", dtype, {16, 1, 28, 28}, 10, holds_blocks);
    EXPECT_EQ(plain.counted_arguments, 0u) << dtype_name(dtype);
    // V: written by conv1's forward, read by conv2's forward and backward and conv1's backward;
    // dV: written by conv2's backward, read by conv1's.
    EXPECT_EQ(blocked.counted_arguments, 6u) << dtype_name(dtype);
    // Kiln's pair kernel, where it takes conv2's weight gradient, reads an NCHW input without a
    // reorder (Note [A weight gradient in BFloat16 pairs]); asked on the meta device.
    const TensorOptions meta = TensorOptions().dtype(dtype).device(kMeta);
    const bool pairs = cpu::conv2d_weight_gradient_in_pairs(
        empty({64, 32, 3, 3}, meta), empty({64}, meta), empty({16, 64, 14, 14}, meta), {},
        empty({16, 32, 14, 14}, meta), {}, ops::im2col_geometry({16, 32, 14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}));
    EXPECT_EQ(blocked.reorders, plain.reorders - (pairs ? 2 : 3))
        << dtype_name(dtype) << ": conv2's input " << (pairs ? "once" : "twice")
        << " into blocks, its gradient once out of them";
    EXPECT_EQ(blocked.values, plain.values) << dtype_name(dtype);
  }
}

TEST_F(ChannelBlocks, AnActivationSomethingElseReadsStaysNchw) {
  for (const bool also_read : {false, true}) {
    const testing::CompiledRun plain =
        testing::train_compiled<TwoLayerCnn>(kEveryOtherPass, kFloat32, {4, 1, 12, 12}, 5, holds_blocks, also_read);
    const testing::CompiledRun blocked = testing::train_compiled<TwoLayerCnn>(
        std::string(kEveryOtherPass) + ",propagate_channel_blocks", kFloat32, {4, 1, 12, 12}, 5, holds_blocks,
        also_read);
    EXPECT_EQ(blocked.values, plain.values) << (also_read ? "read elsewhere" : "");
    // Read elsewhere, V stays, and so does its gradient (the mean's backward adds into it).
    EXPECT_EQ(blocked.counted_arguments, also_read ? 0u : 6u);
  }
}

}  // namespace
}  // namespace kiln
