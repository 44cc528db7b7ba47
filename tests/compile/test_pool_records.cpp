// tests/compile/test_pool_records.cpp — window records (Note [A pool window in one byte]) and
// record_pool_windows (Note [Records instead of indices]): every kernel that makes or reads
// records computes, bit for bit, what it computes with Int64 indices and the pooled values; the
// pass gives train_cnn's two pooled layers records and its step the same bits as without them,
// and leaves indices alone where the pool is not 2x2.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "../../examples/support/models.h"
#include "compile/capture.h"
#include "compiled_training.h"
#include "compile/passes.h"
#include "core/backends.h"
#include "core/cpu/pool_record.h"
#include "support/test_util.h"

namespace kiln {
namespace {

/// Eager and replayed runs compute the same bits only on a fixed thread count (the default
/// count backs off while the machine is busy; Note [Exact resumption]).
class PoolRecords : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(get_num_threads()); }
};

/// A convolution (thin with one input channel, oneDNN's with eight) and relu with a NaN and
/// relu's zeros among its outputs, pooled 2x2 by the fused kernel with Int64 indices and with
/// records: the same values, records that name the same winners, and relu's bit that is
/// !(value <= 0); then each backward kernel that takes records gives the gradients it gives
/// from the indices and the values.
TEST_F(PoolRecords, EveryKernelReadsAndWritesRecordsAsItDoesIndices) {
  const BackendKernels& cpu = registered_kernels(DeviceType::CPU);
  manual_seed(5);
  for (const DType dtype : {kFloat32, kBFloat16}) {
    for (const std::int64_t channels : {1, 8}) {
      if (channels == 8 && dtype == kBFloat16 && !backends::onednn_has_bf16()) continue;
      for (const std::int64_t size : {12, 11}) {  // 11: the pool's floor cuts the last row and column
        const std::string what = std::string(dtype_name(dtype)) + ", " + std::to_string(channels) + " channels, " +
                                 std::to_string(size);
        const TensorOptions options = TensorOptions().dtype(dtype);
        const Tensor input = randn({3, channels, size, size}).to(dtype);
        const Tensor weight = (randn({24, channels, 3, 3}) * 0.4).to(dtype), bias = randn({24}).to(dtype);
        input.view({-1}).narrow(0, 40, 1).fill_(std::nan(""));
        const Im2ColGeometry conv_g{.channels = channels, .height = size, .width = size, .kernel_h = 3,
                                    .kernel_w = 3, .pad_h = 1, .pad_w = 1, .out_h = size, .out_w = size};
        const std::int64_t pooled = size / 2;
        const Im2ColGeometry pool_g{.channels = 24, .height = size, .width = size, .kernel_h = 2, .kernel_w = 2,
                                    .stride_h = 2, .stride_w = 2, .out_h = pooled, .out_w = pooled};
        ASSERT_TRUE(cpu::pools_whole_2x2_windows(pool_g));
        const Tensor values = empty({3, 24, pooled, pooled}, options), indices = empty(values.sizes(), kInt64);
        const Tensor record_values = empty_like(values), records = empty(values.sizes(), kUInt8);
        cpu.conv2d.forward_relu_max_pool(values, indices, input, weight, bias, conv_g, pool_g, 1);
        cpu.conv2d.forward_relu_max_pool(record_values, records, input, weight, bias, conv_g, pool_g, 1);
        ASSERT_TRUE(testing::same_bits(record_values, values)) << what;
        const Tensor winners = empty(values.sizes(), kInt64);
        cpu::pool_indices_from_records(winners, records, size);
        EXPECT_TRUE(equal(winners, indices)) << what;
        const Tensor stopped = values.le(0).contiguous();
        std::int64_t wrong_verdicts = 0;
        for (std::int64_t k = 0; k < records.numel(); ++k) {
          wrong_verdicts += cpu::pool_record_passes(records.data_ptr<std::uint8_t>()[k]) == stopped.data_ptr<bool>()[k];
        }
        EXPECT_EQ(wrong_verdicts, 0) << what << ": relu's bit is !(value <= 0)";
        EXPECT_GT(values.ne(values).sum().item<double>(), 0) << what << ": a NaN window";
        EXPECT_GT(values.eq(0).sum().item<double>(), 0) << what << ": windows relu's backward stops";
        // The conversion the unfused kernels use makes the same records from the indices.
        const Tensor converted = empty(values.sizes(), kUInt8);
        cpu::pool_records_from_indices(converted, indices, values, size);
        EXPECT_TRUE(equal(converted, records)) << what;

        const Tensor grad_pooled = randn(values.sizes()).to(dtype);
        const Tensor finite_input = input.masked_fill(input.ne(input), 0.5);
        // The pool's backward with relu's, on its own.
        const Tensor want = empty({3, 24, size, size}, options), got = empty_like(want);
        cpu.max_pool2d_backward_relu(want, grad_pooled, indices, values);
        cpu.max_pool2d_backward_relu(got, grad_pooled, records, values);
        EXPECT_TRUE(equal(got, want)) << what << ": max_pool2d_backward_relu";
        // A first layer's weight and bias gradients through the pool.
        const Tensor want_weight = empty_like(weight), want_bias = empty({1, 24, 1, 1}, options);
        const Tensor got_weight = empty_like(weight), got_bias = empty_like(want_bias);
        cpu.conv2d.backward_weight_bias_through_max_pool(want_weight, want_bias, grad_pooled, indices, values,
                                                         finite_input, conv_g, 1);
        cpu.conv2d.backward_weight_bias_through_max_pool(got_weight, got_bias, grad_pooled, records, values,
                                                         finite_input, conv_g, 1);
        EXPECT_TRUE(testing::same_bits(got_weight, want_weight)) << what << ": weight gradient through the pool";
        EXPECT_TRUE(testing::same_bits(got_bias, want_bias)) << what << ": bias gradient through the pool";
        // A layer with an input gradient: oneDNN's two backward passes (or their unfused trio).
        if (channels == 8) {
          const Tensor want_input = empty_like(input), got_input = empty_like(input);
          cpu.conv2d.backward_through_max_pool(want_input, want_weight, want_bias, grad_pooled, indices, values,
                                               weight, finite_input, conv_g, 1);
          cpu.conv2d.backward_through_max_pool(got_input, got_weight, got_bias, grad_pooled, records, values, weight,
                                               finite_input, conv_g, 1);
          EXPECT_TRUE(testing::same_bits(got_input, want_input)) << what << ": input gradient";
          EXPECT_TRUE(testing::same_bits(got_weight, want_weight)) << what << ": weight gradient";
          EXPECT_TRUE(testing::same_bits(got_bias, want_bias)) << what << ": bias gradient";
        }
      }
    }
  }
}

bool is_record(const Tensor& t) { return t.dtype() == kUInt8; }

TEST_F(PoolRecords, TrainCnnsTwoLayersKeepRecordsAndTheSameBits) {
  if (!backends::onednn_is_available()) GTEST_SKIP() << "without oneDNN the CPU convolves by unfold + GEMM, unfused";
  // With every pass (the backward fused into the convolutions), and with the pool's backward
  // on its own (fuse_pool_relu_backward's kernel reads the records).
  for (const std::string& fusions :
       {std::string("eliminate_common_subexpressions,fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,fuse_linear,"
                    "fuse_conv_bias_backward,fuse_unpool_weight_gradient,fuse_unpool_conv_backward,fold_constants,"
                    "plan_memory"),
        std::string("fuse_conv_relu,fuse_pool_relu_backward,fuse_conv_pool,plan_memory")}) {
    const testing::CompiledRun indices =
        testing::train_compiled<examples::Cnn>(fusions, kFloat32, {16, 1, 28, 28}, 10, is_record);
    const testing::CompiledRun records = testing::train_compiled<examples::Cnn>(
        fusions + ",record_pool_windows", kFloat32, {16, 1, 28, 28}, 10, is_record);
    EXPECT_EQ(indices.counted_arguments, 0u) << fusions;
    // Each layer's records: written by its forward, read by its backward.
    EXPECT_EQ(records.counted_arguments, 4u) << fusions;
    EXPECT_EQ(records.values, indices.values) << fusions;
  }
}

/// conv -> relu -> a pool that is not 2x2 (3x3, stride 2, padded: windows overlap), on oneDNN's
/// route, where the fused forward still pools the blocked output.
struct OverlappingPoolCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv;
  std::shared_ptr<nn::Linear> fc;
  OverlappingPoolCnn() : Module("OverlappingPoolCnn") {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(8, 16, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    fc = register_module("fc", std::make_shared<nn::Linear>(16 * 5 * 5, 3));
  }
  Tensor forward(const Tensor& x) override {
    return fc->forward(max_pool2d(conv->forward(x).relu(), {3, 3}, {2, 2}, {1, 1}).flatten(1));
  }
};

TEST_F(PoolRecords, IndicesStayWhereTheWindowsAreNot2x2) {
  if (!backends::onednn_is_available()) GTEST_SKIP() << "without oneDNN the CPU convolves by unfold + GEMM, unfused";
  manual_seed(2);
  auto model = std::make_shared<OverlappingPoolCnn>();
  auto step = compile([&](const Tensor& x, const Tensor& y) {
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    return loss;
  });
  step(randn({4, 8, 10, 10}), randint(0, 3, {4}));
  EXPECT_EQ(step.graph().count(compiler::KernelFamily::ConvForwardReluMaxPool), 1u);
  std::size_t records = 0;
  for (const compiler::Node& node : step.graph().nodes) {
    if (node.kind != compiler::Node::Kind::Kernel) continue;
    for (const Tensor* t : std::as_const(*node.call).tensors()) records += t->defined() && is_record(*t);
  }
  EXPECT_EQ(records, 0u) << "a 3x3 window's winner does not fit two bits";

}

}  // namespace
}  // namespace kiln
