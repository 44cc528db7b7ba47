// examples/train_mlp.cpp — trains an MLP (784-512-256-10, ReLU) on Fashion-MNIST and prints
// the test accuracy after each epoch. The README's main command runs it.
//   build/examples/train_mlp --epochs 10 --log mlp.csv --checkpoint mlp.safetensors
// Read next: examples/support/training.h (the loop), examples/train_cnn.cpp.
#include "support/models.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  examples::Flags flags("train_mlp", "an MLP on Fashion-MNIST (Adam, cosine schedule)");
  examples::TrainConfig defaults;
  defaults.epochs = 10;
  defaults.lr = 1e-3;
  examples::add_common_flags(flags, defaults);
  flags.parse(argc, argv);
  const examples::TrainConfig config = examples::config_from(flags);
  manual_seed(config.seed);
  examples::Mlp model;
  try {
    examples::train_fashion_mnist(model, config, [](const Tensor& images) {
      return examples::normalize_fashion(images).flatten(1);
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "train_mlp: %s\n", e.message().c_str());
    return 1;
  }
  return 0;
}
