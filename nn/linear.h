// nn/linear.h — Linear: y = x W^T + b, with W [out_features, in_features] (PyTorch's layout),
// initialised as PyTorch does: kaiming_uniform_ with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)),
// and the bias from the same range.
// Read next: nn/conv.h.
#pragma once

#include "nn/module.h"

namespace kiln::nn {

class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  std::string extra_repr() const override;

  const std::int64_t in_features, out_features;
  Tensor& weight;
  Tensor& bias;  // undefined when built without bias
};

}  // namespace kiln::nn
