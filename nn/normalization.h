// nn/normalization.h — BatchNorm1d, BatchNorm2d and LayerNorm with PyTorch's options and
// behaviour: running statistics updated with `momentum` (or a cumulative average when it is
// unset) during training and used in eval(); a batch with one value per channel in training
// is PyTorch's "Expected more than 1 value per channel when training" error (a documented
// failure case: fix with drop_last or eval()).
// Read next: nn/layers.h (Dropout).
#pragma once

#include <optional>

#include "nn/module.h"

namespace kiln::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  /// Weight of the new batch in the running averages; nullopt = cumulative moving average.
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

class BatchNorm : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  void reset_running_stats();
  std::string extra_repr() const override;

  const std::int64_t num_features;
  const BatchNormOptions options;
  Tensor& weight;
  Tensor& bias;
  Tensor& running_mean;
  Tensor& running_var;
  Tensor& num_batches_tracked;

 protected:
  BatchNorm(const char* type_name, std::int64_t num_features, BatchNormOptions options);
  virtual void check_input(const Tensor& input) const = 0;
};

/// Over [N, C] or [N, C, L].
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(std::int64_t num_features, BatchNormOptions options = {})
      : BatchNorm("BatchNorm1d", num_features, options) {}

 protected:
  void check_input(const Tensor& input) const override;
};

/// Over [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(std::int64_t num_features, BatchNormOptions options = {})
      : BatchNorm("BatchNorm2d", num_features, options) {}

 protected:
  void check_input(const Tensor& input) const override;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  const Shape normalized_shape;
  const double eps;
  Tensor& weight;
  Tensor& bias;
};

}  // namespace kiln::nn
