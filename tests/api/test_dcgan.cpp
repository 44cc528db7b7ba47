// tests/api/test_dcgan.cpp — the DCGAN of LibTorch's C++ frontend tutorial (pytorch/examples
// cpp/dcgan), ported idiom for idiom at a smaller size (16x16 images): a generator of
// ConvTranspose2d + BatchNorm2d + ReLU ending in Tanh, a discriminator of Conv2d + LeakyReLU
// (+ BatchNorm2d), Adam with betas (0.5, 0.999), label smoothing with uniform_(0.8, 1.0),
// detach() for the discriminator's step on fakes. A few steps must run and move both nets.
#include <gtest/gtest.h>

#include "kiln.h"

namespace {

using namespace kiln;

constexpr std::int64_t kNoiseSize = 16;

struct Generator : nn::Module {
  Generator()
      : Module("DCGANGenerator"),
        conv1(register_module("conv1", std::make_shared<nn::ConvTranspose2d>(kNoiseSize, 32, 4,
                                                                            nn::ConvTranspose2dOptions{.bias = false}))),
        batch_norm1(register_module("batch_norm1", std::make_shared<nn::BatchNorm2d>(32))),
        conv2(register_module("conv2", std::make_shared<nn::ConvTranspose2d>(
                                           32, 16, 4, nn::ConvTranspose2dOptions{.stride = 2, .padding = 1, .bias = false}))),
        batch_norm2(register_module("batch_norm2", std::make_shared<nn::BatchNorm2d>(16))),
        conv3(register_module("conv3", std::make_shared<nn::ConvTranspose2d>(
                                           16, 1, 4, nn::ConvTranspose2dOptions{.stride = 2, .padding = 1, .bias = false}))) {}

  Tensor forward(const Tensor& input) override {
    Tensor x = relu(batch_norm1->forward(conv1->forward(input)));  // [N, 32, 4, 4]
    x = relu(batch_norm2->forward(conv2->forward(x)));             // [N, 16, 8, 8]
    return tanh(conv3->forward(x));                                // [N, 1, 16, 16]
  }

  std::shared_ptr<nn::ConvTranspose2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> batch_norm1;
  std::shared_ptr<nn::ConvTranspose2d> conv2;
  std::shared_ptr<nn::BatchNorm2d> batch_norm2;
  std::shared_ptr<nn::ConvTranspose2d> conv3;
};

/// The discriminator as a Sequential, as the tutorial writes it (logits: the loss has the sigmoid).
std::shared_ptr<nn::Sequential> make_discriminator() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 16, 4, nn::Conv2dOptions{.stride = 2, .padding = 1, .bias = false}),
      std::make_shared<nn::LeakyReLU>(0.2),
      std::make_shared<nn::Conv2d>(16, 32, 4, nn::Conv2dOptions{.stride = 2, .padding = 1, .bias = false}),
      std::make_shared<nn::BatchNorm2d>(32),
      std::make_shared<nn::LeakyReLU>(0.2),
      std::make_shared<nn::Conv2d>(32, 1, 4, nn::Conv2dOptions{.stride = 1, .padding = 0, .bias = false}),
      std::make_shared<nn::Flatten>()});
}

/// "Real" images: a bright square at a random place, in [-1, 1] like Tanh's range.
Tensor real_batch(std::int64_t n) {
  Tensor images = full({n, 1, 16, 16}, -1.0);
  const Tensor corners = randint(0, 10, {n, 2});
  NoGradGuard no_grad;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = corners[i][0].item<std::int64_t>(), c = corners[i][1].item<std::int64_t>();
    images[i][0].narrow(0, r, 6).narrow(1, c, 6).fill_(1.0);
  }
  return images;
}

TEST(LibTorchExamples, DcganTrainsAFewStepsAsWritten) {
  manual_seed(7);
  Generator generator;
  auto discriminator = make_discriminator();
  optim::Adam generator_optimizer(generator.parameters(), optim::AdamOptions(2e-4).betas({0.5, 0.999}));
  optim::Adam discriminator_optimizer(discriminator->parameters(), optim::AdamOptions(5e-4).betas({0.5, 0.999}));
  const Tensor generator_before = generator.conv3->weight.detach().clone();
  const std::int64_t batch_size = 16;
  double d_first = 0, d_last = 0, g_last = 0;
  for (int step = 0; step < 8; ++step) {
    const Tensor real_images = real_batch(batch_size);
    // Train the discriminator with real images (labels smoothed to [0.8, 1)).
    discriminator->zero_grad();
    Tensor real_labels = empty({batch_size, 1}).uniform_(0.8, 1.0);
    Tensor real_output = discriminator->forward(real_images);
    Tensor d_loss_real = binary_cross_entropy_with_logits(real_output, real_labels);
    d_loss_real.backward();
    // ... and with fakes, detached so the generator gets no gradient from this step.
    Tensor noise = randn({batch_size, kNoiseSize, 1, 1});
    Tensor fake_images = generator.forward(noise);
    Tensor fake_labels = zeros({batch_size, 1});
    Tensor fake_output = discriminator->forward(fake_images.detach());
    Tensor d_loss_fake = binary_cross_entropy_with_logits(fake_output, fake_labels);
    d_loss_fake.backward();
    Tensor d_loss = d_loss_real + d_loss_fake;
    discriminator_optimizer.step();
    // Train the generator: make the discriminator call its fakes real.
    generator.zero_grad();
    fake_labels.fill_(1);
    fake_output = discriminator->forward(fake_images);
    Tensor g_loss = binary_cross_entropy_with_logits(fake_output, fake_labels);
    g_loss.backward();
    generator_optimizer.step();
    if (step == 0) d_first = d_loss.item<double>();
    d_last = d_loss.item<double>();
    g_last = g_loss.item<double>();
    std::printf("[%d] D_loss: %.4f | G_loss: %.4f\n", step, d_last, g_last);
  }
  EXPECT_EQ(generator.forward(randn({2, kNoiseSize, 1, 1})).sizes(), (Shape{2, 1, 16, 16}));
  EXPECT_TRUE(std::isfinite(d_last) && std::isfinite(g_last));
  EXPECT_LT(d_last, d_first);  // the discriminator learns to tell the squares from noise
  EXPECT_GT((generator.conv3->weight.detach() - generator_before).abs().max().item<double>(), 0.0);
}

}  // namespace
