// examples/train_mlp.cpp — trains an MLP (784-512-256-10, ReLU) on Fashion-MNIST and prints
// the test accuracy after each epoch. The README's main command runs it.
//   build/examples/train_mlp --epochs 10 --log mlp.csv --checkpoint mlp.safetensors
// Read next: examples/support/training.h (the loop), examples/train_cnn.cpp.
#include "support/models.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  examples::TrainConfig defaults;
  defaults.epochs = 10;
  defaults.lr = 1e-3;
  return examples::train_main<examples::Mlp>(argc, argv, "train_mlp", "an MLP on Fashion-MNIST (Adam, cosine schedule)",
                                             defaults, [](const Tensor& images) {
                                               return examples::normalize_fashion(images).flatten(1);
                                             });
}
