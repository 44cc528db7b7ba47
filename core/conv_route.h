// core/conv_route.h — which kernels a 2-D convolution runs, decided in one place. The autograd
// op asks conv2d_route whether to record the composite graph or call the op kernels; the CPU's
// op kernels (core/cpu/conv_routes.cpp) ask cpu_conv2d_route which of their three paths runs a
// pass; the compiled step's passes ask it which fused kernel a layer can have. The rules are
// data, kConvRouteRules, read in order (the first that holds is the route), so the reasons a
// reader, a test and a profile see are the same.
// Read next: core/cpu/conv_routes.cpp, core/onednn/conv.cpp.
#pragma once

#include <array>
#include <cstdint>

#include "core/array_ref.h"
#include "core/dtype.h"

namespace kiln {

class Tensor;

enum class ConvRoute : std::uint8_t { Composite, CuDnn, Thin, OneDnn, Eigen };

struct ConvRouteRule {
  ConvRoute route;
  const char* name;  // as the profiler's table names the route
  const char* when;  // the rule, in words
};

/// At most this many taps per output channel (C/groups · kh · kw) make a convolution thin (a
/// first layer): so little arithmetic per output that writing the output bounds it.
inline constexpr std::int64_t kThinConvolutionTaps = 32;

/// The rules, in the order conv2d_route applies them.
inline constexpr std::array<ConvRouteRule, 5> kConvRouteRules{{
    {ConvRoute::Composite, "composite",
     "the device's op-kernel route is off (backends::OpKernelsGuard, PyTorch's torch.backends.cudnn.enabled = "
     "False) or its table has no convolution: unfold + matmul recorded op by op, differentiable to any order "
     "(autograd/functions/conv.cpp)"},
    {ConvRoute::CuDnn, "cudnn", "a CUDA tensor: cuDNN's convolution (core/cuda/cudnn_conv.cpp)"},
    {ConvRoute::Thin, "thin",
     "on the CPU, groups = 1, Float32 or BFloat16, and at most kThinConvolutionTaps taps per output channel: "
     "Kiln's direct kernels, faster than a GEMM or oneDNN where writing the output bounds the work "
     "(core/cpu/conv_thin.cpp)"},
    {ConvRoute::OneDnn, "onednn",
     "on the CPU with oneDNN built in, in a dtype it serves here (Float32; BFloat16 where the CPU has "
     "AVX512_BF16 or AMX): a cached primitive (core/onednn/conv.cpp), or the next rule's kernels where it "
     "builds none for the sizes (counted in backends::onednn_stats().fallbacks)"},
    {ConvRoute::Eigen, "eigen",
     "on the CPU otherwise (no oneDNN, Float64, Float16): Kiln's reference kernels, unfold + GEMM "
     "(core/cpu/conv.cpp)"},
}};

/// The rule of `route` in kConvRouteRules.
const ConvRouteRule& conv_route_rule(ConvRoute route);

/// The route of a convolution of `input` by a weight of sizes `weight_sizes` in `groups`.
ConvRoute conv2d_route(const Tensor& input, IntArrayRef weight_sizes, std::int64_t groups);

/// The CPU's op kernels' route for one pass (Thin, OneDnn or Eigen): conv2d_route's rules
/// after the op-kernel route was taken, for a CPU tensor of `dtype`.
ConvRoute cpu_conv2d_route(DType dtype, IntArrayRef weight_sizes, std::int64_t groups);

}  // namespace kiln
