// tests/profiler/profiled_models.h — the small models the profiler's tests watch train: a CNN
// (conv, relu, pool twice, a linear layer) and an MLP, and one SGD step as the examples take it.
#pragma once

#include <memory>

#include "kiln.h"

namespace kiln::profiled {

/// A CNN small enough for a test: conv, relu, pool twice, then a linear layer.
struct TinyCnn : nn::Module {
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc;
  TinyCnn() : Module("TinyCnn") {
    conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(4, 8, 3, nn::Conv2dOptions{.padding = {1, 1}}));
    fc = register_module("fc", std::make_shared<nn::Linear>(8 * 7 * 7, 10));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(conv1->forward(x).relu(), {2, 2});
    h = max_pool2d(conv2->forward(h).relu(), {2, 2});
    return fc->forward(h.flatten(1));
  }
};

struct TinyMlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  TinyMlp() : Module("TinyMlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(64, 32));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 10));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(fc1->forward(x).relu()); }
};

/// One SGD step, as the examples take it; returns the loss (its graph stays walkable).
inline Tensor train_step(nn::Module& model, optim::SGD& sgd, const Tensor& x, const Tensor& y) {
  sgd.zero_grad();
  Tensor loss = nn::functional::cross_entropy(model.forward(x), y);
  loss.backward();
  sgd.step();
  return loss;
}

}  // namespace kiln::profiled
