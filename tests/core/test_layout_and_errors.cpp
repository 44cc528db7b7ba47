// tests/core/test_layout_and_errors.cpp — views share storage and version counters, reshape
// copies only when it must, type promotion follows PyTorch, in-place ops bump versions, and
// every error a user can cause speaks PyTorch's words (plus where the culprit was created).
#include <limits>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;
using kiln::testing::values_near;

TEST(Views, ShareStorageAndVersionCounter) {
  Tensor x = arange(12.0).reshape({3, 4});
  for (const Tensor& v : {x.view({4, 3}), x.transpose(0, 1), x.permute({1, 0}), x.unsqueeze(0),
                          x.narrow(1, 1, 2), x.slice(0, 0, 3, 2), x.select(0, 1), x.diagonal(),
                          x.expand({2, 3, 4}), x.flatten(), x.t()}) {
    EXPECT_TRUE(v.shares_memory(x));
    EXPECT_EQ(v.impl()->storage(), x.impl()->storage());
    EXPECT_EQ(v.provenance().origin, TensorOrigin::View);
  }
  Tensor row = x.select(0, 1);
  row.fill_(-1);  // writing through a view is visible in the base, and bumps both
  EXPECT_TRUE(values_near(x.select(0, 1), {-1, -1, -1, -1}));
  EXPECT_EQ(x._version(), 1u);
  EXPECT_EQ(row._version(), 1u);
}

TEST(Views, StridesDescribeTheLayout) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_EQ(x.strides(), IntArrayRef({12, 4, 1}));
  EXPECT_EQ(x.transpose(0, 2).strides(), IntArrayRef({1, 4, 12}));
  EXPECT_EQ(x.slice(2, 0, std::nullopt, 2).strides(), IntArrayRef({12, 4, 2}));
  EXPECT_EQ(x.select(1, 2).storage_offset(), 8);
  EXPECT_EQ(zeros({3, 1}).expand({3, 5}).strides(), IntArrayRef({1, 0}));
  EXPECT_FALSE(x.transpose(0, 1).is_contiguous());
  EXPECT_TRUE(x.unsqueeze(1).is_contiguous());
}

TEST(Views, ViewRefusesWhatOnlyReshapeCanDo) {
  Tensor x = arange(6.0).reshape({2, 3});
  Tensor t = x.t();
  EXPECT_ERROR(t.view({6}), "view size is not compatible with input tensor's size and stride (at least one "
                            "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  Tensor r = t.reshape({6});  // must copy
  EXPECT_FALSE(r.shares_memory(x));
  EXPECT_TRUE(values_near(r, {0, 3, 1, 4, 2, 5}));
  Tensor v = x.reshape({3, 2});  // can view
  EXPECT_TRUE(v.shares_memory(x));
  EXPECT_ERROR(x.view({4, 2}), "shape '[4, 2]' is invalid for input of size 6");
  EXPECT_TRUE(values_near(x.view({-1}), {0, 1, 2, 3, 4, 5}));
}

TEST(Views, SliceFollowsPythonRules) {
  Tensor x = arange(10);
  EXPECT_TRUE(values_near(x.slice(0, -3), {7, 8, 9}));
  EXPECT_TRUE(values_near(x.slice(0, 2, 100, 3), {2, 5, 8}));
  EXPECT_EQ(x.slice(0, 8, 2).numel(), 0);
  EXPECT_ERROR(x.slice(0, 0, 5, 0), "slice step must be positive");
  EXPECT_ERROR(x.select(0, 10), "select(): index 10 out of range for tensor of size [10] at dimension 0");
  TensorList parts = x.split_with_sizes({3, 7});
  EXPECT_EQ(parts[1].numel(), 7);
  EXPECT_EQ(x.chunk(3).size(), 3u);
  EXPECT_EQ(x.chunk(3)[2].numel(), 2);
}

TEST(Errors, PyTorchsMessages) {
  EXPECT_ERROR(ones({2, 3}) + ones({2, 4}),
               "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1");
  EXPECT_ERROR(ones({2, 3}).mm(ones({4, 5})), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  EXPECT_ERROR(matmul(ones({2, 3}), ones({3, 2}, kFloat64)), "expected scalar type Double but found Float");
  EXPECT_ERROR(ones({2, 3}).sum(2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
  EXPECT_ERROR(ones({2}, kMeta) + ones({2}),
               "Expected all tensors to be on the same device, but found at least two devices, meta and cpu!");
  EXPECT_ERROR(ones({2}, kBool) - ones({2}, kBool), "Subtraction, the `-` operator, with two bool tensors is not supported");
  EXPECT_ERROR(-ones({2}, kBool), "Negation, the `-` operator, on a bool tensor is not supported");
  EXPECT_ERROR(ones({2}).expand({3}), "The expanded size of the tensor (3) must match the existing size (2) at non-singleton dimension 0");
  EXPECT_ERROR(arange(3).index_select(0, tensor({0, 5})), "index 5 is out of bounds for dimension 0 with size 3");
  EXPECT_ERROR(arange(3.0).gather(0, tensor({-1})), "index -1 is out of bounds for dimension 0 with size 3");
  EXPECT_ERROR(ones({2}).mean(kInt64), "mean(): could not infer output dtype");
  EXPECT_ERROR(tensor({1, 2}).pow(-1), "Integers to negative integer powers are not allowed.");
  EXPECT_ERROR(cat({ones({2, 3}), ones({3, 2})}, 0), "Sizes of tensors must match except in dimension 0");
}

// matmul folded its batch with reshape(-1, ...), which an empty inner dim leaves undetermined,
// and divided numel by that dim for its message: [2, 3, 0] @ [4, 5] died of SIGFPE. PyTorch
// returns zeros for an empty inner dim and names both shapes otherwise.
TEST(Errors, MatmulWithAnEmptyInnerDim) {
  EXPECT_ERROR(matmul(ones({2, 3, 0}), ones({4, 5})), "mat1 and mat2 shapes cannot be multiplied (6x0 and 4x5)");
  const Tensor folded = matmul(ones({2, 3, 0}), ones({0, 5}));
  EXPECT_EQ(folded.sizes(), IntArrayRef({2, 3, 5}));
  EXPECT_TRUE(kiln::testing::tensors_near(folded, zeros({2, 3, 5}), 0.0));
  const Tensor batched = matmul(ones({2, 4, 0}), ones({2, 0, 4}));
  EXPECT_EQ(batched.sizes(), IntArrayRef({2, 4, 4}));
  EXPECT_TRUE(kiln::testing::tensors_near(batched, zeros({2, 4, 4}), 0.0));
  EXPECT_EQ(matmul(ones({0, 4, 3}), ones({0, 3, 2})).sizes(), IntArrayRef({0, 4, 2}));
}

TEST(Errors, DeviceMismatchNamesWhereBothTensorsWereCreated) {
  Tensor on_meta = zeros({2}, kMeta);
  Tensor on_cpu = ones({2});
  const std::string msg = kiln::testing::error_of([&] { (void)(on_meta * on_cpu); });
  EXPECT_NE(msg.find("argument 'self' was created by zeros at test_layout_and_errors.cpp:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("argument 'other' was created by ones at test_layout_and_errors.cpp:"), std::string::npos) << msg;
}

TEST(Errors, CarryTheRaiseSiteOnALaterLine) {
  try {
    (void)(ones({2}) + ones({3}));
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("The size of tensor a (2)"), 0u);
    EXPECT_NE(what.find("\nException raised from "), std::string::npos);
    EXPECT_NE(what.find("core/shape.cpp:"), std::string::npos);
  }
  EXPECT_THROW((void)ones({2}).sum(3), IndexError);
}

TEST(TypePromotion, FollowsResultType) {
  // Dimensioned tensors decide within a category; numbers and 0-d tensors only lift the category.
  EXPECT_EQ((ones({2}, kInt64) + 2.5).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kHalf) + 2.5).dtype(), kHalf);
  EXPECT_EQ((ones({2}, kFloat32) + ones({}, kFloat64)).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kFloat32) + ones({2}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ((ones({2}, kInt32) + ones({}, kInt64)).dtype(), kInt32);
  EXPECT_EQ((ones({2}, kUInt8) + ones({2}, kInt8)).dtype(), kInt16);
  EXPECT_EQ((ones({2}, kHalf) + ones({2}, kBFloat16)).dtype(), kFloat32);
  EXPECT_EQ((ones({2}, kBool) + ones({2}, kBool)).dtype(), kBool);
  EXPECT_EQ((ones({2}, kUInt8) + 1000).dtype(), kUInt8);
  EXPECT_EQ((tensor({1, 2}) / 2).dtype(), kFloat32);  // true division
  EXPECT_EQ((ones({2}) > 0).dtype(), kBool);
  EXPECT_EQ(ones({2}, kInt32).sum().dtype(), kInt64);
  EXPECT_EQ(ones({2}, kInt32).exp().dtype(), kFloat32);
  EXPECT_EQ(promote_types(kFloat16, kBFloat16), kFloat32);
  EXPECT_FALSE(can_cast(kFloat32, kInt64));
}

TEST(InPlace, BumpVersionsAndConvert) {
  Tensor x = zeros({2, 3});
  EXPECT_EQ(x._version(), 0u);
  x.add_(ones({3}));  // broadcast
  x.mul_(2);
  x.sub_(tensor({1.0}), 0.5);
  x.div_(3);
  EXPECT_TRUE(values_near(x, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}));
  EXPECT_EQ(x._version(), 4u);
  x.copy_(tensor({1, 2, 3}));  // Int64 into Float32, broadcast over rows
  EXPECT_TRUE(values_near(x, {1, 2, 3, 1, 2, 3}));
  x.clamp_(1.5, 2.5).zero_();
  EXPECT_TRUE(values_near(x, {0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(x._version(), 8u);
  Tensor i = zeros({2}, kInt64);
  EXPECT_ERROR(i.add_(0.5), "result type Float can't be cast to the desired output type Long");
  EXPECT_ERROR(x.add_(ones({2, 2, 3})), "output with shape [2, 3] doesn't match the broadcast shape [2, 2, 3]");
  EXPECT_ERROR(zeros({1}).expand({3}).fill_(1), "unsupported operation: more than one element of the written-to tensor refers to a single memory location");
}

TEST(InPlace, OverlappingArgumentsAreReadBeforeWritten) {
  Tensor x = arange(4.0).reshape({2, 2});
  x.add_(x.t());  // [[0,1],[2,3]] + [[0,2],[1,3]]
  EXPECT_TRUE(values_near(x, {0, 3, 3, 6}));
}

TEST(Meta, ShapesWithoutData) {
  Tensor a = empty({128, 784}, kMeta);
  Tensor w = empty({512, 784}, kMeta);
  Tensor y = linear(a, w).relu().sum(1);
  EXPECT_TRUE(y.is_meta());
  EXPECT_EQ(y.sizes(), IntArrayRef({128}));
  EXPECT_EQ(to_string(y), "tensor(..., device='meta', size=(128,))");
  EXPECT_ERROR(y.sum().item(), "Tensor.item() cannot be called on meta tensors");
  EXPECT_ERROR(conv2d(empty({1, 3, 8, 8}, kMeta), empty({4, 2, 3, 3}, kMeta)),
               "Given groups=1, weight of size [4, 2, 3, 3], expected input[1, 3, 8, 8] to have 2 channels");
}

TEST(Conv2d, ABiasOfTheWrongSizeIsAnError) {
  const Tensor x = randn({1, 2, 5, 5}), w = randn({4, 2, 3, 3});
  EXPECT_ERROR(conv2d(x, w, randn({3})),
               "Given weight of size [4, 2, 3, 3], expected bias to be 1-dimensional with 4 elements, but got bias "
               "of size [3] instead");
  EXPECT_ERROR(conv2d(x, w, randn({4, 1})), "expected bias to be 1-dimensional with 4 elements");
}

TEST(Devices, ParseAndPrint) {
  EXPECT_EQ(Device("cuda:1").index(), 1);
  EXPECT_TRUE(Device("meta").is_meta());
  EXPECT_EQ(Device("cpu").str(), "cpu");
  EXPECT_ERROR(Device("gpu"), "Expected one of cpu, cuda, meta device type at start of device string: gpu");
  EXPECT_ERROR(Device("cuda:x"), "Invalid device string: 'cuda:x'");
}

TEST(IntegerArithmetic, WrapsOnOverflowLikePyTorch) {
  // Found by fuzz_npy: summing arbitrary Int64 data overflowed (undefined behaviour in C++).
  // Integers wrap, two's complement, as in PyTorch and NumPy (Note [Integer overflow]).
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ((tensor({big}) + 1).item<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(tensor({big, big}).sum().item<std::int64_t>(), -2);
  EXPECT_EQ((-tensor({std::numeric_limits<std::int64_t>::min()})).item<std::int64_t>(), std::numeric_limits<std::int64_t>::min());
  EXPECT_EQ(tensor({100}, kInt8).mul(2).item<std::int64_t>(), -56);
}
