// nn/init.h — parameter initialisation, with PyTorch's formulas (torch.nn.init), so that a
// model initialised after the same manual_seed starts from the same values as in PyTorch.
// Every function fills the tensor in place without recording, and returns it.
// Read next: nn/linear.h (which uses kaiming_uniform_ with a = sqrt(5), PyTorch's default).
#pragma once

#include <string>
#include <utility>

#include "core/tensor.h"

namespace kiln::nn::init {

enum class FanMode { FanIn, FanOut };

/// PyTorch's calculate_gain: "linear"/"conv2d"/"sigmoid" 1, "tanh" 5/3, "relu" sqrt(2),
/// "leaky_relu" sqrt(2 / (1 + a^2)), "selu" 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
/// (fan_in, fan_out) of a weight: dims 1 and 0 times the receptive field (dims 2 and up).
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
Tensor& constant_(Tensor& t, double value);
Tensor& ones_(Tensor& t);
Tensor& zeros_(Tensor& t);
/// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0);
/// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0);
/// U(-b, b) with b = gain * sqrt(3 / fan), gain = calculate_gain(nonlinearity, a).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         const std::string& nonlinearity = "leaky_relu");
/// N(0, std^2) with std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        const std::string& nonlinearity = "leaky_relu");

}  // namespace kiln::nn::init
