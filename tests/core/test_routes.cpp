// tests/core/test_routes.cpp — core/routes.h, the one place per op family that decides which
// kernels run: each rule of each family is reached by the case it describes, and the first
// rule that holds wins.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/backends.h"
#include "core/creation.h"
#include "core/meta_allocations.h"
#include "core/routes.h"

namespace kiln {
namespace {

using routes::Route;

template <std::size_t N>
void expect_one_rule_per_route(const std::array<routes::Rule, N>& rules) {
  std::set<Route> seen;
  for (const routes::Rule& rule : rules) {
    EXPECT_TRUE(seen.insert(rule.route).second) << routes::name(rule.route) << " twice";
    EXPECT_GT(std::string(rule.when).size(), 20u) << routes::name(rule.route) << " says why";
  }
}

TEST(Routes, EachFamilyHasOneRulePerRouteSayingWhy) {
  expect_one_rule_per_route(routes::kConvolution);
  expect_one_rule_per_route(routes::kPooling);
  expect_one_rule_per_route(routes::kBatchNorm);
  expect_one_rule_per_route(routes::kMatrixProduct);
  std::set<std::string> names;
  for (Route r : {Route::Composite, Route::Cuda, Route::Thin, Route::OneDnn, Route::Eigen}) names.insert(routes::name(r));
  EXPECT_EQ(names.size(), 5u);
}

TEST(Routes, AFirstLayerIsThinInFloat32AndBFloat16Only) {
  static_assert(routes::kThinConvolutionTaps == 32);  // C/groups · kh · kw
  EXPECT_EQ(routes::cpu_conv2d(kFloat32, {32, 1, 3, 3}, 1), Route::Thin);
  EXPECT_EQ(routes::cpu_conv2d(kBFloat16, {32, 3, 3, 3}, 1), Route::Thin);
  EXPECT_EQ(routes::cpu_conv2d(kFloat32, {8, 2, 4, 4}, 1), Route::Thin) << "32 taps is still thin";
  EXPECT_NE(routes::cpu_conv2d(kFloat32, {8, 3, 3, 4}, 1), Route::Thin) << "36 taps is not";
  EXPECT_NE(routes::cpu_conv2d(kFloat32, {32, 1, 3, 3}, 2), Route::Thin) << "grouped";
  EXPECT_EQ(routes::cpu_conv2d(kFloat64, {32, 1, 3, 3}, 1), Route::Eigen);
  EXPECT_EQ(routes::cpu_conv2d(kFloat16, {32, 1, 3, 3}, 1), Route::Eigen);
}

TEST(Routes, OneDnnTakesTheConvolutionsItServesAndEigenTheRest) {
  const Route library = backends::onednn_is_available() ? Route::OneDnn : Route::Eigen;
  EXPECT_EQ(routes::cpu_conv2d(kFloat32, {64, 32, 3, 3}, 1), library);
  EXPECT_EQ(routes::cpu_conv2d(kFloat32, {64, 16, 3, 3}, 2), library);
  EXPECT_EQ(routes::cpu_conv2d(kBFloat16, {64, 32, 3, 3}, 1),
            backends::onednn_has_bf16() ? Route::OneDnn : Route::Eigen);
  EXPECT_EQ(routes::cpu_conv2d(kFloat64, {64, 32, 3, 3}, 1), Route::Eigen);
}

TEST(Routes, TheCompositeGraphWhenTheOpKernelRouteIsOff) {
  const Tensor input = empty({2, 32, 8, 8});
  // The CPU's default: the op kernels with oneDNN built in (core/onednn/register.cpp), else the graph.
  EXPECT_EQ(routes::conv2d(input, {64, 32, 3, 3}, 1) != Route::Composite, backends::onednn_is_available());
  {
    backends::OpKernelsGuard off(DeviceType::CPU, false);  // PyTorch's cudnn.enabled = False
    EXPECT_EQ(routes::conv2d(input, {64, 32, 3, 3}, 1), Route::Composite);
  }
  {
    backends::OpKernelsGuard on(DeviceType::CPU, true);
    EXPECT_EQ(routes::conv2d(input, {64, 32, 3, 3}, 1), routes::cpu_conv2d(kFloat32, {64, 32, 3, 3}, 1));
    EXPECT_EQ(routes::conv2d(empty({2, 1, 8, 8}), {32, 1, 3, 3}, 1), Route::Thin);
  }
}

TEST(Routes, AMetaTensorTakesTheRouteOfTheDeviceItStandsFor) {
  const Tensor planned = empty({2, 32, 8, 8}, TensorOptions().device(kMeta));
  EXPECT_EQ(routes::conv2d(planned, {64, 32, 3, 3}, 1), Route::Composite) << "meta alone runs no kernels";
  MetaStandsForGuard cpu(DeviceType::CPU);
  backends::OpKernelsGuard on(DeviceType::CPU, true);
  EXPECT_EQ(routes::conv2d(planned, {64, 32, 3, 3}, 1), routes::cpu_conv2d(kFloat32, {64, 32, 3, 3}, 1));
}

TEST(Routes, PoolingTakesKilnsKernelsUnlessDilatedOrSwitchedOff) {
  const Tensor input = empty({2, 4, 8, 8});
  Im2ColGeometry g;
  g.channels = 4, g.height = 8, g.width = 8, g.kernel_h = 2, g.kernel_w = 2, g.stride_h = 2, g.stride_w = 2;
  g.out_h = 4, g.out_w = 4;
  backends::OpKernelsGuard on(DeviceType::CPU, true);
  EXPECT_EQ(routes::pool2d(input, g), Route::Eigen);
  Im2ColGeometry dilated = g;
  dilated.dilation_h = 2;
  EXPECT_EQ(routes::pool2d(input, dilated), Route::Composite) << "cuDNN's pooling has no dilation";
  backends::OpKernelsGuard off(DeviceType::CPU, false);
  EXPECT_EQ(routes::pool2d(input, g), Route::Composite);
}

TEST(Routes, BatchNormTakesTheKernelsWhenEveryStatisticIsInItsDtype) {
  const Tensor input = empty({4, 3, 5, 5});
  const Tensor weight = empty({3}), bias = empty({3}), mean = empty({3}), var = empty({3});
  backends::OpKernelsGuard on(DeviceType::CPU, true);
  EXPECT_EQ(routes::batch_norm(input, weight, bias, mean, var), Route::Eigen);
  EXPECT_EQ(routes::batch_norm(input, Tensor(), Tensor(), Tensor(), Tensor()), Route::Eigen);
  EXPECT_EQ(routes::batch_norm(input, empty({3}, kFloat64), bias, mean, var), Route::Composite) << "a Float64 weight";
  EXPECT_EQ(routes::batch_norm(empty({4, 3}, kInt64), Tensor(), Tensor(), Tensor(), Tensor()), Route::Composite);
  // BFloat16 input, Float32 statistics (as cuDNN wants them): the kernels.
  EXPECT_EQ(routes::batch_norm(empty({4, 3, 5, 5}, kBFloat16), weight, bias, mean, var), Route::Eigen);
  backends::OpKernelsGuard off(DeviceType::CPU, false);
  EXPECT_EQ(routes::batch_norm(input, weight, bias, mean, var), Route::Composite);
}

TEST(Routes, OneDnnTakesLargeProductsInItsDtypesAndEigenTheRest) {
  const Route library = backends::onednn_is_available() ? Route::OneDnn : Route::Eigen;
  const Tensor a = empty({1, 64, 64}), b = empty({1, 64, 64}), out = empty({1, 64, 64});
  EXPECT_EQ(routes::cpu_matrix_product(out, a, b), library) << "64x64x64 is the smallest oneDNN takes";
  const Tensor small_a = empty({1, 64, 63}), small_b = empty({1, 63, 64});
  EXPECT_EQ(routes::cpu_matrix_product(out, small_a, small_b), Route::Eigen);
  const Tensor a64 = empty({1, 64, 64}, kFloat64), b64 = empty({1, 64, 64}, kFloat64), out64 = empty({1, 64, 64}, kFloat64);
  EXPECT_EQ(routes::cpu_matrix_product(out64, a64, b64), Route::Eigen);
  backends::OpKernelsGuard off(DeviceType::CPU, false);  // PyTorch's mkldnn.enabled = False
  EXPECT_EQ(routes::cpu_matrix_product(out, a, b), Route::Eigen);
}

}  // namespace
}  // namespace kiln
