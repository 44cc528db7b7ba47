// examples/fgsm.cpp — adversarial examples with the Fast Gradient Sign Method on
// Fashion-MNIST: the test accuracy as eps grows, and a PNG of original / perturbation /
// adversarial images with the labels the model predicts.
//   build/examples/fgsm                                   # trains an MLP for 2 epochs first
//   build/examples/fgsm --model cnn --checkpoint cnn.safetensors   # a model from train_cnn
// Each batch of images is made with requires_grad at creation (as_leaf(true) signs that
// contract over the loader's memory without copying); see examples/support/fgsm.h.
// Read next: examples/support/fgsm.h, examples/support/png.h.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "support/fgsm.h"
#include "support/models.h"
#include "support/png.h"
#include "support/training.h"

namespace {

using namespace kiln;

/// Three rows of `count` tiles: the originals (true and predicted label above), eps·sign of
/// the gradient (grey = 0), and the adversarial images (predicted label above).
void write_grid(const std::string& path, const Tensor& clean, const Tensor& adversarial, const Tensor& labels,
                const Tensor& clean_pred, const Tensor& adv_pred, int count) {
  const int scale = 3, tile = 28 * scale, band = 16, gap = 4;
  examples::GrayImage grid(count * (tile + gap) + gap, 3 * (tile + band) + gap, 40);
  const Tensor perturbation = adversarial - clean;
  const double eps = std::max(perturbation.abs().max().item<double>(), 1e-12);
  for (int i = 0; i < count; ++i) {
    const Tensor rows[3] = {clean[i][0], perturbation[i][0] / (2 * eps) + 0.5, adversarial[i][0]};
    const int x0 = gap + i * (tile + gap);
    for (int r = 0; r < 3; ++r) {
      const Tensor plane = rows[r].to(kCPU).to(kFloat32).contiguous();
      const float* px = plane.data_ptr<float>();
      const int y0 = r * (tile + band) + band;
      for (int y = 0; y < tile; ++y) {
        for (int x = 0; x < tile; ++x) {
          const float v = std::clamp(px[(y / scale) * 28 + x / scale], 0.0f, 1.0f);
          grid.at(x0 + x, y0 + y) = static_cast<std::uint8_t>(std::lround(v * 255));
        }
      }
    }
    const auto label = labels[i].item<std::int64_t>();
    const auto before = clean_pred[i].item<std::int64_t>(), after = adv_pred[i].item<std::int64_t>();
    examples::draw_digit(grid, static_cast<int>(label), x0, 3, 2, 160);  // true label, grey
    examples::draw_digit(grid, static_cast<int>(before), x0 + 10, 3, 2, 255);
    // Adversarial prediction: white when still right, dark when fooled.
    examples::draw_digit(grid, static_cast<int>(after), x0, 2 * (tile + band) + 3, 2, after == label ? 255 : 90);
  }
  examples::write_png(path, grid);
}

}  // namespace

constexpr double kEpsilons[] = {0.0, 0.01, 0.02, 0.05, 0.1, 0.2};

int main(int argc, char** argv) {
  using namespace kiln::examples::flag_checks;
  return examples::run_program("fgsm", [&] {
    examples::TrainConfig config;
    config.epochs = 2;
    std::string model_kind = "mlp", weights, png = "fgsm.png";
    double show_eps = 0.1;
    examples::Flags flags("fgsm", "FGSM adversarial examples against a Fashion-MNIST model");
    examples::add_training_flags(flags, config);
    flags.add("--model", model_kind, "mlp or cnn")->check(one_of({"mlp", "cnn"}));
    flags.add("--weights", weights, "load this checkpoint (from train_mlp/train_cnn) instead of training")
        ->check(existing_file());
    flags.add("--png", png, "where to write the image grid")->check(writable_file());
    flags.add("--show-eps", show_eps, "the eps of the images in the grid: one of the attack's 0, 0.01, 0.02, 0.05, "
              "0.1, 0.2")
        ->check(CLI::Validator(
            [](std::string& value) -> std::string {
              double eps = -1;
              if (parse_number(value, eps)) {
                for (double e : kEpsilons) {
                  if (std::abs(eps - e) < 1e-12) return {};
                }
              }
              return "expected one of 0, 0.01, 0.02, 0.05, 0.1, 0.2 (the eps values the attack runs), got '" +
                     value + "'";
            },
            "EPS"));
    flags.parse(argc, argv);
    const bool cnn = model_kind == "cnn";
    const auto input = [cnn](const Tensor& images) {
      const Tensor x = examples::normalize_fashion(images);
      return cnn ? x : x.flatten(1);
    };
    manual_seed(config.seed);
    std::unique_ptr<nn::Module> model;
    if (cnn) model = std::make_unique<examples::Cnn>();
    else model = std::make_unique<examples::Mlp>();
    if (!weights.empty()) {
      model->load_state_dict(load(weights));
      std::printf("loaded %s\n", weights.c_str());
    } else {
      std::printf("training the %s for %lld epochs first (or pass --weights)\n", model_kind.c_str(),
                  static_cast<long long>(config.epochs));
      examples::train_fashion_mnist(*model, config, input);
    }
    model->to(config.device);
    model->eval();

    data::DataLoader test(data::FashionMNIST::load(false, config.data_root), {.batch_size = 500});
    std::printf("\n%8s %14s\n", "eps", "test accuracy");
    for (double eps : kEpsilons) {
      std::int64_t correct = 0, total = 0;
      bool drawn = false;
      for (const data::Example& batch : test) {
        // The attack's input is created with requires_grad: a new leaf over the batch's memory.
        const Tensor images = batch.data.to(config.device).as_leaf(/*requires_grad=*/true);
        const Tensor labels = batch.target.to(config.device);
        const Tensor adversarial = examples::fgsm(*model, images, labels, eps, input);
        model->zero_grad();
        NoGradGuard no_grad;
        const Tensor predicted = model->forward(input(adversarial)).argmax(1);
        correct += (predicted == labels).sum().item<std::int64_t>();
        total += labels.numel();
        if (!drawn && std::abs(eps - show_eps) < 1e-12) {
          const Tensor clean_pred = model->forward(input(images.detach())).argmax(1);
          write_grid(png, images.detach(), adversarial, labels, clean_pred, predicted, 8);
          drawn = true;
        }
      }
      std::printf("%8.2f %13.2f%%\n", eps, 100.0 * static_cast<double>(correct) / static_cast<double>(total));
    }
    std::printf("\nwrote %s: top row originals (true label grey, prediction white), middle the perturbation "
                "eps*sign(grad) at eps %.2f, bottom the adversarial images (prediction: white = still right, "
                "dark = fooled)\n", png.c_str(), show_eps);
    return 0;
  });
}
