// examples/train_cnn.cpp — trains a small CNN (two 3x3 conv layers with max-pooling, then
// 3136-128-10) on Fashion-MNIST.
//   build/examples/train_cnn --epochs 5 --log cnn.csv
// Read next: examples/support/models.h, autograd/functions/conv.cpp.
#include "support/models.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  examples::Flags flags("train_cnn", "a small CNN on Fashion-MNIST (Adam, cosine schedule)");
  examples::TrainConfig defaults;
  defaults.epochs = 5;
  defaults.lr = 1e-3;
  examples::add_common_flags(flags, defaults);
  flags.parse(argc, argv);
  const examples::TrainConfig config = examples::config_from(flags);
  manual_seed(config.seed);
  examples::Cnn model;
  try {
    examples::train_fashion_mnist(model, config, [](const Tensor& images) { return examples::normalize_fashion(images); });
  } catch (const Error& e) {
    std::fprintf(stderr, "train_cnn: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
