// tests/core/test_conv_route.cpp — conv2d_route (core/conv_route.h), the one place that decides
// which kernels a convolution runs: each rule of kConvRouteRules is reached by the case it
// describes, and the first rule that holds wins.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/backends.h"
#include "core/conv_route.h"
#include "core/creation.h"
#include "core/meta_allocations.h"

namespace kiln {
namespace {

TEST(ConvRoute, EveryRouteHasOneRuleWithItsOwnName) {
  std::set<std::string> names;
  for (const ConvRouteRule& rule : kConvRouteRules) {
    EXPECT_EQ(&conv_route_rule(rule.route), &rule);
    EXPECT_TRUE(names.insert(rule.name).second) << rule.name;
    EXPECT_GT(std::string(rule.when).size(), 20u) << rule.name << " says why";
  }
  EXPECT_EQ(names.size(), 5u);
}

TEST(ConvRoute, AFirstLayerIsThinInFloat32AndBFloat16Only) {
  const std::int64_t taps = kThinConvolutionTaps;  // C/groups · kh · kw
  EXPECT_EQ(cpu_conv2d_route(kFloat32, {32, 1, 3, 3}, 1), ConvRoute::Thin);
  EXPECT_EQ(cpu_conv2d_route(kBFloat16, {32, 3, 3, 3}, 1), ConvRoute::Thin);
  EXPECT_EQ(cpu_conv2d_route(kFloat32, {8, 2, 4, 4}, 1), ConvRoute::Thin) << taps << " taps is still thin";
  EXPECT_NE(cpu_conv2d_route(kFloat32, {8, 3, 3, 4}, 1), ConvRoute::Thin) << "36 taps is not";
  EXPECT_NE(cpu_conv2d_route(kFloat32, {32, 1, 3, 3}, 2), ConvRoute::Thin) << "grouped";
  EXPECT_EQ(cpu_conv2d_route(kFloat64, {32, 1, 3, 3}, 1), ConvRoute::Eigen);
  EXPECT_EQ(cpu_conv2d_route(kFloat16, {32, 1, 3, 3}, 1), ConvRoute::Eigen);
}

TEST(ConvRoute, OneDnnTakesWhatItServesAndEigenTheRest) {
  const ConvRoute library = backends::onednn_is_available() ? ConvRoute::OneDnn : ConvRoute::Eigen;
  EXPECT_EQ(cpu_conv2d_route(kFloat32, {64, 32, 3, 3}, 1), library);
  EXPECT_EQ(cpu_conv2d_route(kFloat32, {64, 16, 3, 3}, 2), library);
  EXPECT_EQ(cpu_conv2d_route(kBFloat16, {64, 32, 3, 3}, 1),
            backends::onednn_has_bf16() ? ConvRoute::OneDnn : ConvRoute::Eigen);
  EXPECT_EQ(cpu_conv2d_route(kFloat64, {64, 32, 3, 3}, 1), ConvRoute::Eigen);
}

TEST(ConvRoute, TheCompositeGraphWhenTheOpKernelRouteIsOff) {
  const Tensor input = empty({2, 32, 8, 8});
  // The CPU's default: the op kernels with oneDNN built in (core/onednn/register.cpp), else the graph.
  EXPECT_EQ(conv2d_route(input, {64, 32, 3, 3}, 1) != ConvRoute::Composite, backends::onednn_is_available());
  {
    backends::OpKernelsGuard off(DeviceType::CPU, false);  // PyTorch's cudnn.enabled = False
    EXPECT_EQ(conv2d_route(input, {64, 32, 3, 3}, 1), ConvRoute::Composite);
  }
  {
    backends::OpKernelsGuard on(DeviceType::CPU, true);
    EXPECT_EQ(conv2d_route(input, {64, 32, 3, 3}, 1), cpu_conv2d_route(kFloat32, {64, 32, 3, 3}, 1));
    EXPECT_EQ(conv2d_route(empty({2, 1, 8, 8}), {32, 1, 3, 3}, 1), ConvRoute::Thin);
  }
}

TEST(ConvRoute, AMetaTensorTakesTheRouteOfTheDeviceItStandsFor) {
  const Tensor planned = empty({2, 32, 8, 8}, TensorOptions().device(kMeta));
  EXPECT_EQ(conv2d_route(planned, {64, 32, 3, 3}, 1), ConvRoute::Composite) << "meta alone runs no kernels";
  MetaStandsForGuard cpu(DeviceType::CPU);
  backends::OpKernelsGuard on(DeviceType::CPU, true);
  EXPECT_EQ(conv2d_route(planned, {64, 32, 3, 3}, 1), cpu_conv2d_route(kFloat32, {64, 32, 3, 3}, 1));
}

}  // namespace
}  // namespace kiln
