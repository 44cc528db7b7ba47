// nn/layers.h — the parameter-free layers: activations, dropout, pooling, Flatten, Identity,
// and Embedding (a lookup table). Each is a thin module over the function of the same name in
// autograd/functions/nn.h.
// Read next: nn/containers.h.
#pragma once

#include <optional>

#include "autograd/functions/elementwise.h"
#include "autograd/functions/nn.h"
#include "nn/module.h"

namespace kiln::nn {

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override { return x.relu(); }
};

class GELU : public Module {
 public:
  GELU() : Module("GELU") {}
  Tensor forward(const Tensor& x) override { return x.gelu(); }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : Module("LeakyReLU"), negative_slope(negative_slope) {}
  Tensor forward(const Tensor& x) override { return leaky_relu(x, negative_slope); }
  const double negative_slope;
};

class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override { return x.tanh(); }
};

class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override { return x.sigmoid(); }
};

class Softmax : public Module {
 public:
  explicit Softmax(std::int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override { return x.softmax(dim); }
  std::string extra_repr() const override { return detail::str_cat("dim=", dim); }
  const std::int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(std::int64_t dim) : Module("LogSoftmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override { return x.log_softmax(dim); }
  std::string extra_repr() const override { return detail::str_cat("dim=", dim); }
  const std::int64_t dim;
};

class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

/// Flattens dims start_dim..end_dim (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  std::string extra_repr() const override { return detail::str_cat("start_dim=", start_dim, ", end_dim=", end_dim); }
  const std::int64_t start_dim, end_dim;
};

/// Zeroes elements with probability p in training (scaling the rest by 1/(1-p)); the
/// identity in eval().
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout(x, p, is_training()); }
  std::string extra_repr() const override { return detail::str_cat("p=", p, ", inplace=False"); }
  const double p;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Pair kernel_size, OptionalPair stride = std::nullopt, Pair padding = {0, 0},
                     Pair dilation = {1, 1});
  explicit MaxPool2d(std::int64_t kernel_size) : MaxPool2d(Pair{kernel_size, kernel_size}) {}
  Tensor forward(const Tensor& x) override { return max_pool2d(x, kernel_size, stride, padding, dilation); }
  std::string extra_repr() const override;
  const Pair kernel_size, stride, padding, dilation;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Pair kernel_size, OptionalPair stride = std::nullopt, Pair padding = {0, 0},
                     bool count_include_pad = true);
  explicit AvgPool2d(std::int64_t kernel_size) : AvgPool2d(Pair{kernel_size, kernel_size}) {}
  Tensor forward(const Tensor& x) override { return avg_pool2d(x, kernel_size, stride, padding, count_include_pad); }
  std::string extra_repr() const override;
  const Pair kernel_size, stride, padding;
  const bool count_include_pad;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Pair output_size) : Module("AdaptiveAvgPool2d"), output_size(output_size) {}
  Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, output_size); }
  std::string extra_repr() const override {
    return detail::str_cat("output_size=(", output_size[0], ", ", output_size[1], ")");
  }
  const Pair output_size;
};

/// A lookup table: row i of weight [num_embeddings, embedding_dim] for index i. Initialised
/// N(0, 1) like PyTorch; the padding_idx row starts at zero and receives no gradient.
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t embedding_dim,
            std::optional<std::int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override { return embedding(weight, indices, padding_idx); }
  std::string extra_repr() const override;
  const std::int64_t num_embeddings, embedding_dim;
  const std::optional<std::int64_t> padding_idx;
  Tensor& weight;
};

}  // namespace kiln::nn
