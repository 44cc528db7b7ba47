// tests/core/test_print.cpp — tensors print exactly as PyTorch 1.13 prints them (reference
// strings from PyTorch, with "torch." read as "kiln.").
#include "support/test_util.h"

using namespace kiln;

TEST(Print, MatchesPyTorch) {
  EXPECT_EQ(to_string(tensor({1e-5, 1.0, 123456.})), "tensor([1.0000e-05, 1.0000e+00, 1.2346e+05])");
  EXPECT_EQ(to_string(tensor({0.1, 1.0, 12.5})), "tensor([ 0.1000,  1.0000, 12.5000])");
  EXPECT_EQ(to_string(tensor({{1, -20}, {300, 4}})), "tensor([[  1, -20],\n        [300,   4]])");
  EXPECT_EQ(to_string(tensor({true, false})), "tensor([ True, False])");
  EXPECT_EQ(to_string(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(to_string(zeros({0})), "tensor([])");
  EXPECT_EQ(to_string(tensor(2.5)), "tensor(2.5000)");
  EXPECT_EQ(to_string(arange(8.0).reshape({2, 2, 2})),
            "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])");
  EXPECT_EQ(to_string(arange(30.0)),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
  EXPECT_EQ(to_string(tensor({double(NAN), double(INFINITY), -1.5})), "tensor([    nan,     inf, -1.5000])");
  EXPECT_EQ(to_string(tensor({1.5, 2.0}, kHalf)), "tensor([1.5000, 2.0000], dtype=kiln.float16)");
  EXPECT_EQ(to_string(tensor({1, 2}, kInt32)), "tensor([1, 2], dtype=kiln.int32)");
}

TEST(Print, SummarisesLargeTensors) {
  EXPECT_EQ(to_string(arange(2000)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(to_string(arange(2000.0).reshape({40, 50})),
            "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,\n"
            "         4.9000e+01],\n"
            "        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,\n"
            "         9.9000e+01],\n"
            "        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,\n"
            "         1.4900e+02],\n"
            "        ...,\n"
            "        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,\n"
            "         1.8990e+03],\n"
            "        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,\n"
            "         1.9490e+03],\n"
            "        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,\n"
            "         1.9990e+03]])");
}

TEST(Print, NonContiguousAndUndefined) {
  EXPECT_EQ(to_string(arange(4).reshape({2, 2}).t()), "tensor([[0, 2],\n        [1, 3]])");
  EXPECT_EQ(to_string(Tensor()), "[ Tensor (undefined) ]");
}
