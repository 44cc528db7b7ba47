// tests/examples/test_fgsm.cpp — the FGSM attack: the perturbation is exactly eps·sign of the
// input gradient (checked against the gradient derived by hand for a linear model), it lowers
// a trained model's accuracy, and an input created without requires_grad is a clear error.
// Also the PNG writer: a file a PNG reader accepts (signature, IHDR, CRC).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "../../examples/support/fgsm.h"
#include "../../examples/support/png.h"
#include "support/test_util.h"

namespace kiln::examples {
namespace {

TEST(Fgsm, PerturbationIsEpsTimesTheSignOfTheInputGradient) {
  // logits = W x with W [3, 4]; for cross-entropy, dL/dx = W^T (softmax(Wx) - onehot(y)).
  nn::Linear model(4, 3, /*bias=*/false);
  {
    NoGradGuard no_grad;
    model.weight.copy_(tensor({{1.0f, -2.0f, 0.5f, 0.0f}, {-1.0f, 1.0f, 2.0f, -0.5f}, {0.25f, 0.5f, -1.0f, 3.0f}}));
  }
  const Tensor x = tensor({{0.4f, 0.5f, 0.6f, 0.45f}}, requires_grad());
  const Tensor y = tensor(std::vector<std::int64_t>{1});
  const double eps = 0.05;
  const Tensor adversarial = fgsm(model, x, y, eps);

  NoGradGuard no_grad;
  const Tensor p = model.weight.detach().mm(x.detach().t()).t().softmax(1);  // [1, 3]
  const Tensor expected_grad = (p - one_hot(y, 3).to(kFloat32)).mm(model.weight.detach());
  EXPECT_TRUE(testing::tensors_near(x.grad(), expected_grad, 1e-6));
  // No pixel is near 0 or 1, so the clamp is inactive and the step is exactly eps·sign.
  EXPECT_TRUE(testing::tensors_near(adversarial - x.detach(), eps * expected_grad.sign(), 1e-7));
  EXPECT_FALSE(adversarial.requires_grad()) << "the adversarial input is made under no-grad";
}

TEST(Fgsm, ClampsToTheValidPixelRange) {
  nn::Linear model(2, 2);
  const Tensor x = tensor({{0.0f, 1.0f}}, requires_grad());
  const Tensor adversarial = fgsm(model, x, tensor(std::vector<std::int64_t>{0}), 0.5);
  EXPECT_GE(adversarial.min().item<float>(), 0.0f);
  EXPECT_LE(adversarial.max().item<float>(), 1.0f);
}

TEST(Fgsm, LowersTheAccuracyOfATrainedModel) {
  // Two classes of points in [0, 1]^8, separable by the mean of the first four coordinates.
  manual_seed(3);
  const Tensor x = rand({400, 8});
  const Tensor y = (x.narrow(1, 0, 4).mean(std::vector<std::int64_t>{1}) > 0.5).to(kInt64);
  nn::Linear model(8, 2);
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.05));
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    cross_entropy(model.forward(x), y).backward();
    opt.step();
  }
  auto accuracy = [&](const Tensor& inputs) {
    NoGradGuard no_grad;
    return (model.forward(inputs).argmax(1) == y).to(kFloat32).mean().item<float>();
  };
  const float clean = accuracy(x);
  const float attacked = accuracy(fgsm(model, x.as_leaf(true), y, 0.1));
  EXPECT_GT(clean, 0.9f);
  EXPECT_LT(attacked, clean - 0.2f) << "clean " << clean << ", adversarial " << attacked;
}

TEST(Fgsm, AnInputWithoutRequiresGradIsAClearError) {
  nn::Linear model(4, 2);
  const Tensor x = rand({1, 4});  // created without requires_grad
  const std::string message = testing::error_of([&] { fgsm(model, x, tensor(std::vector<std::int64_t>{0}), 0.1); });
  EXPECT_NE(message.find("the input images do not require grad"), std::string::npos) << message;
  EXPECT_NE(message.find("requires_grad()"), std::string::npos) << message;
  EXPECT_NE(message.find("argument 'images' was created by rand"), std::string::npos) << message;
}

TEST(Png, WritesAFileWithPngStructure) {
  GrayImage image(5, 3, 0);
  draw_digit(image, 7, 1, 0, 1, 255);
  const std::string path = (std::filesystem::temp_directory_path() / "kiln_test.png").string();
  write_png(path, image);
  std::ifstream in(path, std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 8u + 25u + 12u);
  EXPECT_EQ(std::vector<unsigned char>(bytes.begin(), bytes.begin() + 8),
            (std::vector<unsigned char>{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}));
  EXPECT_EQ(std::string(bytes.begin() + 12, bytes.begin() + 16), "IHDR");
  EXPECT_EQ(bytes[19], 5u) << "width";
  EXPECT_EQ(bytes[23], 3u) << "height";
  // The IHDR CRC covers type + data (17 bytes from offset 12).
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), bytes.data() + 12, 17);
  const std::uint32_t stored = (bytes[29] << 24) | (bytes[30] << 16) | (bytes[31] << 8) | bytes[32];
  EXPECT_EQ(stored, static_cast<std::uint32_t>(crc));
  EXPECT_EQ(std::string(bytes.end() - 8, bytes.end() - 4), "IEND");
  // The top row of a 7 in the font is three lit pixels from x = 1.
  EXPECT_EQ(image.at(1, 0), 255);
  EXPECT_EQ(image.at(3, 0), 255);
  EXPECT_EQ(image.at(0, 0), 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kiln::examples
