// examples/train_cnn.cpp — trains a small CNN (two 3x3 conv layers with max-pooling, then
// 3136-128-10) on Fashion-MNIST.
//   build/examples/train_cnn --epochs 5 --log cnn.csv
// Read next: examples/support/models.h, autograd/functions/conv.cpp.
#include "support/models.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  examples::TrainConfig defaults;
  defaults.epochs = 5;
  defaults.lr = 1e-3;
  return examples::train_main<examples::Cnn>(argc, argv, "train_cnn",
                                             "a small CNN on Fashion-MNIST (Adam, cosine schedule)", defaults,
                                             [](const Tensor& images) { return examples::normalize_fashion(images); });
}
