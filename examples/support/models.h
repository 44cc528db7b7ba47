// examples/models.h — the two Fashion-MNIST models the examples and benchmarks train:
// an MLP 784-512-256-10 and a small CNN (conv 1->32, conv 32->64, two pools, 3136-128-10).
#pragma once

#include "kiln.h"

namespace kiln::examples {

struct Mlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2, fc3;
  Mlp() : Module("Mlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 512));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(512, 256));
    fc3 = register_module("fc3", std::make_shared<nn::Linear>(256, 10));
  }
  Tensor forward(const Tensor& x) override {
    return (*fc3)((*fc2)((*fc1)(x).relu()).relu());
  }
};

struct Cnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc1, fc2;
  Cnn() : Module("Cnn") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 32, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(32, 64, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(3136, 128));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(128, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d((*conv1)(x).relu(), {2, 2});  // [N, 32, 14, 14]
    h = max_pool2d((*conv2)(h).relu(), {2, 2});          // [N, 64, 7, 7]
    return (*fc2)((*fc1)(h.flatten(1)).relu());
  }
};

/// Fashion-MNIST's pixel mean and standard deviation.
inline Tensor normalize_fashion(const Tensor& images) { return (images - 0.2860) / 0.3530; }

}  // namespace kiln::examples
