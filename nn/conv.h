// nn/conv.h — Conv2d over [N, C, H, W], weight [out, in/groups, kh, kw], PyTorch's default
// initialisation (kaiming_uniform_ with a = sqrt(5), bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
// The kernels a convolution runs (cuDNN, Kiln's thin kernels, oneDNN, unfold + GEMM) are
// routes::conv2d's to choose (core/routes.h).
// Read next: nn/layers.h (pooling, dropout and the other layers without weights of their own).
#pragma once

#include "autograd/functions/nn.h"
#include "nn/module.h"

namespace kiln::nn {

/// Options as an aggregate, set by name: Conv2dOptions{.stride = 2, .padding = 1}.
struct Conv2dOptions {
  Pair stride{1, 1};
  Pair padding{0, 0};
  Pair dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, Pair kernel_size, Conv2dOptions options = {});
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, Conv2dOptions options = {})
      : Conv2d(in_channels, out_channels, Pair{kernel_size, kernel_size}, options) {}
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  std::string extra_repr() const override;

  const std::int64_t in_channels, out_channels;
  const Pair kernel_size;
  const Conv2dOptions options;
  Tensor& weight;
  Tensor& bias;
};

struct ConvTranspose2dOptions {
  Pair stride = 1;
  Pair padding = 0;
  Pair output_padding = 0;
  Pair dilation = 1;
  bool bias = true;
};

/// The transposed convolution (PyTorch's ConvTranspose2d, groups = 1): weight
/// [in_channels, out_channels, kh, kw], initialised like PyTorch's.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(std::int64_t in_channels, std::int64_t out_channels, Pair kernel_size,
                  ConvTranspose2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  std::string extra_repr() const override;

  const std::int64_t in_channels, out_channels;
  const Pair kernel_size;
  const ConvTranspose2dOptions options;
  Tensor& weight;
  Tensor& bias;
};

}  // namespace kiln::nn
