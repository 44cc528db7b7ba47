// tests/core/test_creation.cpp — the creation paths and the memory semantics each promises:
// tensor() always copies, from_blob/as_tensor share, owners are kept alive, dtypes are never
// reinterpreted, and to()/contiguous() return the same tensor when nothing changes.
#include <atomic>
#include <limits>
#include <memory>
#include <vector>

#include "core/eigen.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;
using kiln::testing::values_near;

// --- tensor(): a deep copy -----------------------------------------------------------------

TEST(Tensor, LiteralsGetPyTorchsDtypes) {
  EXPECT_EQ(tensor({1.5, 2.5}).dtype(), kFloat32);  // C++ doubles: the default dtype
  EXPECT_EQ(tensor({1, 2}).dtype(), kInt64);
  EXPECT_EQ(tensor({true, false}).dtype(), kBool);
  EXPECT_EQ(tensor(2.5).dim(), 0);
  EXPECT_EQ(tensor({1.5, 2.5}, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(tensor(std::vector<double>{1, 2}).dtype(), kFloat32);
  EXPECT_EQ(tensor(std::vector<std::uint8_t>{1, 2}).dtype(), kInt64);
  EXPECT_TRUE(values_near(tensor({{{1., 2.}}, {{3., 4.}}}), {1, 2, 3, 4}));
  EXPECT_EQ(tensor({{{1., 2.}}, {{3., 4.}}}).sizes(), IntArrayRef({2, 1, 2}));
}

TEST(Tensor, RaggedListsAreRejectedLikePyTorch) {
  EXPECT_ERROR(tensor({{1., 2., 3.}, {4., 5.}}), "expected sequence of length 3 at dim 1 (got 2)");
}

TEST(Tensor, IsAlwaysACopy) {
  std::vector<float> source{1, 2, 3};
  Tensor t = tensor(source);
  source[0] = 100;  // mutate the source: the tensor keeps its own copy
  EXPECT_TRUE(values_near(t, {1, 2, 3}));
  Tensor u = tensor(t);
  u.fill_(7);
  EXPECT_TRUE(values_near(t, {1, 2, 3}));
  EXPECT_FALSE(u.shares_memory(t));
  EXPECT_EQ(t.impl()->storage()->provenance().origin, MemoryOrigin::Copied);
}

TEST(Tensor, CopyOfATensorIsDetached) {
  Tensor w = ones({2}, requires_grad());
  Tensor c = tensor(w * 2);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_TRUE(c.is_leaf());
  EXPECT_TRUE(values_near(c, {2, 2}));
}

TEST(Tensor, ConvertsInOnePassFromSpan) {
  const double src[] = {0.5, 1.5, 2.5};
  Tensor t = tensor(std::span<const double>(src), kFloat16);
  EXPECT_EQ(t.dtype(), kFloat16);
  EXPECT_TRUE(values_near(t, {0.5, 1.5, 2.5}));
}

// --- from_blob(): zero-copy --------------------------------------------------------------------

TEST(FromBlob, SharesMemoryBothWays) {
  auto buffer = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  Tensor t = from_blob(buffer->data(), {2, 3}, buffer);
  (*buffer)[0] = 10;  // write through the source...
  EXPECT_TRUE(values_near(t, {10, 2, 3, 4, 5, 6}));
  {
    NoGradGuard no_grad;
    t.select(1, 2).fill_(-1);  // ...and through the tensor
  }
  EXPECT_EQ((*buffer)[2], -1);
  EXPECT_EQ((*buffer)[5], -1);
  EXPECT_EQ(t.data_ptr<float>(), buffer->data());
  EXPECT_EQ(t.impl()->storage()->provenance().origin, MemoryOrigin::ZeroCopy);
}

TEST(FromBlob, OwnerLivesUntilTheLastViewDies) {
  std::weak_ptr<std::vector<float>> watch;
  Tensor view;
  {
    auto buffer = std::make_shared<std::vector<float>>(12, 1.0f);
    watch = buffer;
    Tensor t = from_blob(buffer->data(), {3, 4}, buffer);
    view = t.transpose(0, 1).select(0, 2);
  }
  EXPECT_FALSE(watch.expired());  // the view still holds the storage, which holds the owner
  EXPECT_TRUE(values_near(view, {1, 1, 1}));
  view = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(FromBlob, DeleterRunsOnceAfterLastUse) {
  static std::atomic<int> freed{0};
  freed = 0;
  auto* data = new double[4]{1, 2, 3, 4};
  {
    Tensor t = from_blob(data, {4}, [](void* p) {
      delete[] static_cast<double*>(p);
      ++freed;
    });
    EXPECT_EQ(t.dtype(), kFloat64);  // the pointer's type, not the default dtype
    Tensor s = t.slice(0, 1, 3);
    t = Tensor();
    EXPECT_EQ(freed.load(), 0);
    EXPECT_TRUE(values_near(s, {2, 3}));
  }
  EXPECT_EQ(freed.load(), 1);
}

TEST(FromBlob, NeverReinterpretsTheDtype) {
  std::vector<double> data{1, 2};
  EXPECT_ERROR(from_blob_borrowed(data.data(), {2}, kFloat32),
               "from_blob: the buffer holds Double values but the options ask for Float");
}

TEST(FromBlob, StridedAndBorrowed) {
  float data[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = from_blob_borrowed(data, {3, 2}, {1, 3});  // column-major view of a 2x3 buffer
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(values_near(t, {0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(t.impl()->storage()->provenance().origin, MemoryOrigin::Borrowed);
  EXPECT_NE(t.describe().find("from_blob_borrowed at test_creation.cpp:"), std::string::npos) << t.describe();
}

// --- as_tensor(): share when possible ------------------------------------------------------

TEST(AsTensor, ReturnsTheSameTensorWhenTermsMatch) {
  Tensor x = ones({3});
  Tensor same = as_tensor(x);
  EXPECT_TRUE(same.is_same(x));  // not a copy, not even a new handle
  Tensor converted = as_tensor(x, kFloat64);
  EXPECT_FALSE(converted.shares_memory(x));
  EXPECT_EQ(converted.dtype(), kFloat64);
  EXPECT_EQ(converted.impl()->storage()->provenance().origin, MemoryOrigin::Copied);
}

TEST(AsTensor, MovedVectorIsZeroCopy) {
  std::vector<std::int32_t> v{1, 2, 3};
  const std::int32_t* before = v.data();
  Tensor t = as_tensor(std::move(v));
  EXPECT_EQ(t.dtype(), kInt32);
  EXPECT_EQ(t.data_ptr<std::int32_t>(), before);  // the vector's own buffer
  EXPECT_EQ(t.impl()->storage()->provenance().origin, MemoryOrigin::ZeroCopy);
}

TEST(AsTensor, SharedVectorIsZeroCopyAndKeptAlive) {
  auto v = std::make_shared<std::vector<float>>(std::vector<float>{1, 2});
  Tensor t = as_tensor(v);
  (*v)[1] = 5;
  EXPECT_TRUE(values_near(t, {1, 5}));
  EXPECT_EQ(v.use_count(), 2);
}

TEST(AsTensor, LvalueVectorIsCopiedBecauseItCannotBeKeptAlive) {
  std::vector<float> v{1, 2};
  Tensor t = as_tensor(v);
  v[0] = 9;
  EXPECT_TRUE(values_near(t, {1, 2}));
  EXPECT_EQ(t.dtype(), kFloat32);  // but its own dtype is kept
}

TEST(AsTensor, EigenColumnMajorBecomesANonContiguousView) {
  auto m = std::make_shared<Eigen::MatrixXf>(2, 3);
  *m << 1, 2, 3, 4, 5, 6;
  Tensor t = from_eigen(m);
  EXPECT_EQ(t.sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(t.strides(), IntArrayRef({1, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(values_near(t, {1, 2, 3, 4, 5, 6}));
  (*m)(1, 2) = 60;
  EXPECT_TRUE(values_near(t, {1, 2, 3, 4, 5, 60}));
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_memory(t));

  Eigen::Matrix<double, 2, 2, Eigen::RowMajor> r;
  r << 1, 2, 3, 4;
  Tensor rt = as_tensor(std::move(r));
  EXPECT_TRUE(rt.is_contiguous());
  EXPECT_EQ(rt.dtype(), kFloat64);
}

// --- factories ------------------------------------------------------------------------------

TEST(Factories, ValuesAndDtypes) {
  EXPECT_TRUE(values_near(zeros({2, 2}), {0, 0, 0, 0}));
  EXPECT_TRUE(values_near(ones({3}, kInt32), {1, 1, 1}));
  EXPECT_EQ(full({2}, 2.5).dtype(), kFloat32);
  EXPECT_EQ(full({2}, 2).dtype(), kInt64);
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_TRUE(values_near(arange(5), {0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(0.0, 1.0, 0.25).dtype(), kFloat32);
  EXPECT_TRUE(values_near(arange(0.0, 1.0, 0.25), {0, 0.25, 0.5, 0.75}));
  EXPECT_TRUE(values_near(arange(10, 0, -3), {10, 7, 4, 1}));
  EXPECT_TRUE(values_near(linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1}));
  EXPECT_TRUE(values_near(eye(2, 3), {1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(empty({0, 3}).numel(), 0);
  EXPECT_ERROR(zeros({-1}), "Trying to create tensor with negative dimension -1");
  EXPECT_ERROR(arange(0, 5, 0), "step must be nonzero");
}

// Sizes whose product does not fit in int64 are PyTorch's errors, never a wrapped count: a
// wrapped count can come out 0, and every op would then treat a huge tensor as empty (issue 31).
TEST(Factories, HugeSizesAreErrorsNotWrappedCounts) {
  const std::int64_t big = std::int64_t{1} << 40;
  EXPECT_ERROR(empty({big, big}), "Storage size calculation overflowed with sizes=[1099511627776, 1099511627776]");
  EXPECT_ERROR(empty({big, big}, TensorOptions().device(kMeta)), "Storage size calculation overflowed");
  EXPECT_ERROR(ones({1, 1}).expand({big, big}), "numel: integer multiplication overflow");
  float one = 1.0f;
  EXPECT_ERROR(from_blob_borrowed(&one, {big, big}, {0, 0}), "numel: integer multiplication overflow");
  EXPECT_EQ(zeros({1, 0}).expand({big, 0}).numel(), 0);  // a zero size wins over any other
  // arange's count is a double first; past int64 it is PyTorch's error, not a cast's UB.
  EXPECT_ERROR(arange(0.0, 1e20), "invalid size, possible overflow?");
  EXPECT_ERROR(arange(0.0, 1.0, 1e-300), "invalid size, possible overflow?");
  EXPECT_ERROR(arange(0.0, std::numeric_limits<double>::infinity()), "unsupported range: 0 -> inf");
  EXPECT_ERROR(arange(0.0, std::numeric_limits<double>::quiet_NaN()), "unsupported range: 0 -> nan");
}

TEST(Factories, LikeKeepsShapeDtypeAndDevice) {
  Tensor x = ones({2, 3}, kFloat64);
  EXPECT_EQ(zeros_like(x).sizes(), IntArrayRef({2, 3}));
  EXPECT_EQ(zeros_like(x).dtype(), kFloat64);
  EXPECT_EQ(ones_like(x, kInt32).dtype(), kInt32);
  EXPECT_TRUE(values_near(full_like(x, 4), {4, 4, 4, 4, 4, 4}));
  EXPECT_EQ(rand_like(x).dtype(), kFloat64);
}

TEST(Factories, RequiresGradOnlyForFloatingDtypes) {
  EXPECT_TRUE(ones({2}, requires_grad()).requires_grad());
  EXPECT_ERROR(ones({2}, dtype(kInt64).requires_grad(true)),
               "Only Tensors of floating point and complex dtype can require gradients");
}

TEST(Factories, RecordTheirCallSite) {
  Tensor t = zeros({2});
  const int line = __LINE__ - 1;
  EXPECT_EQ(t.provenance().origin, TensorOrigin::Created);
  EXPECT_STREQ(t.provenance().api, "zeros");
  EXPECT_EQ(t.provenance().site.line, static_cast<std::uint32_t>(line));
  EXPECT_EQ(t.describe(), "created by zeros at test_creation.cpp:" + std::to_string(line));
}

// --- conversions: copy only when a term changes ------------------------------------------------

TEST(Conversions, SameTensorWhenNothingChanges) {
  Tensor x = ones({2, 3});
  EXPECT_TRUE(x.to(kFloat32).is_same(x));
  EXPECT_TRUE(x.to(kCPU).is_same(x));
  EXPECT_TRUE(x.contiguous().is_same(x));
  EXPECT_FALSE(x.to(kFloat32, /*copy=*/true).is_same(x));
  EXPECT_FALSE(x.clone().shares_memory(x));
  Tensor d = x.detach();
  EXPECT_TRUE(d.shares_memory(x));
  EXPECT_FALSE(d.is_same(x));
  EXPECT_EQ(d.provenance().origin, TensorOrigin::Detached);
  Tensor t = x.t();
  EXPECT_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_memory(x));
  EXPECT_TRUE(values_near(c, values(t)));
}

TEST(Conversions, ToDtypeConvertsValues) {
  Tensor x = tensor({1.7, -2.2, 3.5});
  EXPECT_TRUE(values_near(x.to(kInt64), {1, -2, 3}));
  EXPECT_TRUE(values_near(x.to(kBool), {1, 1, 1}));
  EXPECT_TRUE(values_near(x.to(kBFloat16), {1.703125, -2.203125, 3.5}));
  EXPECT_TRUE(values_near(tensor({70000.0}).to(kHalf), {INFINITY}));
}

TEST(Conversions, AsLeafSignsANewContractOverTheSameMemory) {
  Tensor data = ones({3});
  Tensor w = data.as_leaf(true);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.shares_memory(data));
  EXPECT_FALSE(data.requires_grad());
}

TEST(DataAccess, TypedPointersAreChecked) {
  Tensor d = zeros({2}, kFloat64);
  EXPECT_NE(d.data_ptr<double>(), nullptr);
  EXPECT_ERROR(d.data_ptr<float>(), "expected scalar type Float but found Double");
  EXPECT_ERROR(ones({2}).item(), "a Tensor with 2 elements cannot be converted to Scalar");
  EXPECT_EQ(tensor(3.5).item<double>(), 3.5);
  EXPECT_EQ(tensor(7).item<int>(), 7);
  EXPECT_ERROR(Tensor().dim(), "Tensor is undefined");
}
