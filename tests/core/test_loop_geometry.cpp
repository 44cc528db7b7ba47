// tests/core/test_loop_geometry.cpp — the elementwise loop geometry both backends share
// (core/loop_geometry.h): broadcast strides, size-1 dims dropped, contiguous dims merged; and
// CUDA's launch struct made from it (core/cuda/elementwise_launch.h), checked here on the CPU
// because the struct is plain C++ and no GPU may be there to run it.
#include <gtest/gtest.h>

#include "core/creation.h"
#include "core/cuda/elementwise_launch.h"
#include "core/loop_geometry.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

TEST(LoopGeometry, AContiguousTensorOfAnyRankIsOneFlatLoop) {
  const Tensor out = empty({2, 3, 4});
  const Tensor in = empty({2, 3, 4}, kFloat64);
  const Loop<2> loop = make_loop<2>(out.sizes(), {&out, &in});
  EXPECT_EQ(loop.ndim, 1);
  EXPECT_EQ(loop.numel, 24);
  EXPECT_EQ(loop.sizes[0], 24);
  EXPECT_EQ(loop.strides[0][0], 4);  // bytes: Float32
  EXPECT_EQ(loop.strides[0][1], 8);  // Float64
}

TEST(LoopGeometry, ABroadcastOperandStepsByZeroAndSizeOneDimsAreDropped) {
  const Tensor out = empty({3, 1, 4});
  const Tensor column = empty({3, 1, 1});
  const Tensor row = empty({4});
  const Loop<3> loop = make_loop<3>(out.sizes(), {&out, &column, &row});
  ASSERT_EQ(loop.ndim, 2);  // [3, 1, 4]: the 1 goes; 4 and 3 cannot merge (the row restarts)
  EXPECT_EQ(loop.sizes[0], 4);
  EXPECT_EQ(loop.sizes[1], 3);
  EXPECT_EQ(loop.strides[0][0], 4);
  EXPECT_EQ(loop.strides[1][0], 16);
  EXPECT_EQ(loop.strides[0][1], 0);
  EXPECT_EQ(loop.strides[1][1], 4);
  EXPECT_EQ(loop.strides[0][2], 4);
  EXPECT_EQ(loop.strides[1][2], 0);
}

TEST(LoopGeometry, CudasLaunchIsTheSameGeometryOutermostFirstInElements) {
  const Tensor out = empty({3, 4}, kFloat64);
  const Tensor transposed = ops::transpose(empty({4, 3}, kFloat16), 0, 1);  // strides [1, 3]
  const cuda::Elementwise<2> e = cuda::elementwise_launch<2>({&out, &transposed});
  EXPECT_EQ(e.numel, 12);
  ASSERT_EQ(e.dims, 2);
  EXPECT_FALSE(e.contiguous);
  EXPECT_EQ(e.sizes[0], 3);
  EXPECT_EQ(e.sizes[1], 4);
  EXPECT_EQ(e.strides[0][0], 4);  // the output: row-major, in elements
  EXPECT_EQ(e.strides[0][1], 1);
  EXPECT_EQ(e.strides[1][0], 1);  // the transposed input, in its own elements
  EXPECT_EQ(e.strides[1][1], 3);
  EXPECT_EQ(e.dtype[0], kFloat64);
  EXPECT_EQ(e.dtype[1], kFloat16);
  EXPECT_EQ(e.data[1], static_cast<char*>(transposed.raw_data_ptr()));
}

TEST(LoopGeometry, CudasLaunchIsFlatWhenEveryOperandIsDense) {
  const Tensor out = empty({2, 3, 4});
  const Tensor same = empty({2, 3, 4}, kInt64);
  const cuda::Elementwise<2> dense = cuda::elementwise_launch<2>({&out, &same});
  EXPECT_TRUE(dense.contiguous);
  EXPECT_EQ(dense.dims, 1);
  EXPECT_EQ(dense.sizes[0], 24);

  const Tensor scalar = empty({});
  const cuda::Elementwise<2> broadcast = cuda::elementwise_launch<2>({&out, &scalar});
  EXPECT_FALSE(broadcast.contiguous);  // the scalar steps by 0, not by 1
  EXPECT_EQ(broadcast.strides[1][0], 0);

  const Tensor one = empty({1, 1});
  const cuda::Elementwise<2> single = cuda::elementwise_launch<2>({&one, &scalar});
  EXPECT_TRUE(single.contiguous);  // one element: offset 0 for every operand
  EXPECT_EQ(single.numel, 1);
}

}  // namespace
}  // namespace kiln
