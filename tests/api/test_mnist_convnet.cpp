// tests/api/test_mnist_convnet.cpp — LibTorch's classic C++ frontend example (examples/cpp/
// mnist in pytorch/examples) ported line for line: the same Net, the same loop, the same
// idioms (conv -> max_pool2d -> relu, dropout(x, 0.5, is_training()), view(-1, 320),
// log_softmax + nll_loss, SGD with momentum, pred = argmax, correct += pred.eq(target)).
// The data is a small synthetic set in MNIST's shape so the test is hermetic; a few steps must
// lower the loss.
#include <gtest/gtest.h>

#include "kiln.h"

namespace {

using namespace kiln;

struct Net : nn::Module {
  Net()
      : Module("Net"),
        conv1(register_module("conv1", std::make_shared<nn::Conv2d>(1, 10, /*kernel_size=*/5))),
        conv2(register_module("conv2", std::make_shared<nn::Conv2d>(10, 20, /*kernel_size=*/5))),
        fc1(register_module("fc1", std::make_shared<nn::Linear>(320, 50))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(50, 10))) {}

  Tensor forward(const Tensor& input) override {
    Tensor x = relu(max_pool2d(conv1->forward(input), 2));
    x = relu(max_pool2d(dropout(conv2->forward(x), 0.5, is_training()), 2));
    x = x.view({-1, 320});
    x = relu(fc1->forward(x));
    x = dropout(x, /*p=*/0.5, /*training=*/is_training());
    x = fc2->forward(x);
    return log_softmax(x, /*dim=*/1);
  }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

/// n 28x28 images of ten noisy patterns (`templates`), labelled by pattern.
std::shared_ptr<data::TensorDataset> synthetic_mnist(const Tensor& templates, std::int64_t n) {
  const Tensor targets = randint(0, 10, {n});
  const Tensor images = templates.index_select(0, targets) * 0.7 + rand({n, 1, 28, 28}) * 0.3;
  return std::make_shared<data::TensorDataset>((images - 0.1307) / 0.3081, targets);
}

double train(std::size_t epoch, Net& model, data::DataLoader& loader, optim::Optimizer& optimizer) {
  model.train();
  double last_loss = 0.0;
  std::size_t batch_idx = 0;
  for (const auto& batch : loader) {
    optimizer.zero_grad();
    auto output = model.forward(batch.data);
    auto loss = nll_loss(output, batch.target);
    loss.backward();
    optimizer.step();
    last_loss = loss.item<double>();
    if (batch_idx++ % 4 == 0) std::printf("Train Epoch: %zu [%zu]\tLoss: %.4f\n", epoch, batch_idx, last_loss);
  }
  return last_loss;
}

std::pair<double, double> test(Net& model, data::DataLoader& loader) {
  NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  std::int64_t correct = 0, total = 0;
  for (const auto& batch : loader) {
    auto output = model.forward(batch.data);
    test_loss += nll_loss(output, batch.target, /*weight=*/{}, /*ignore_index=*/-100, Reduction::Sum).item<double>();
    auto pred = output.argmax(1);
    correct += pred.eq(batch.target).sum().item<std::int64_t>();
    total += batch.target.size(0);
  }
  return {test_loss / static_cast<double>(total), static_cast<double>(correct) / static_cast<double>(total)};
}

TEST(LibTorchExamples, MnistConvnetTrainsAsWritten) {
  manual_seed(1);
  const Tensor templates = rand({10, 1, 28, 28});
  auto train_set = synthetic_mnist(templates, 256);
  auto test_set = synthetic_mnist(templates, 128);
  data::DataLoader train_loader(train_set, {.batch_size = 64, .shuffle = true});
  data::DataLoader test_loader(test_set, {.batch_size = 128});
  Net model;
  optim::SGD optimizer(model.parameters(), optim::SGDOptions(0.1).momentum(0.5));
  const auto [loss_before, accuracy_before] = test(model, test_loader);
  for (std::size_t epoch = 1; epoch <= 8; ++epoch) train(epoch, model, train_loader, optimizer);
  const auto [loss_after, accuracy_after] = test(model, test_loader);
  std::printf("Test set: loss %.4f -> %.4f, accuracy %.3f -> %.3f\n", loss_before, loss_after, accuracy_before,
              accuracy_after);
  EXPECT_LT(loss_after, 0.7 * loss_before);
  EXPECT_GT(accuracy_after, accuracy_before);
}

}  // namespace
