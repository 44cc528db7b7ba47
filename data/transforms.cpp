// data/transforms.cpp — image transforms.
#include "data/transforms.h"

#include "autograd/functions/index.h"
#include "autograd/functions/nn.h"
#include "core/creation.h"
#include "core/grad_mode.h"

namespace kiln::data::transforms {

Transform ToTensor() {
  return [](const Tensor& image, Rng&) {
    KILN_CHECK(image.dim() == 2 || image.dim() == 3, "ToTensor expects an HW or HWC image, got ", image.sizes());
    const Tensor hwc = image.dim() == 2 ? image.unsqueeze(-1) : image;
    const Tensor chw = hwc.permute({2, 0, 1}).to(kFloat32);
    return image.dtype() == kUInt8 ? chw / 255.0 : chw;
  };
}

Transform Normalize(std::vector<double> mean, std::vector<double> std) {
  KILN_CHECK_VALUE(mean.size() == std.size() && !mean.empty(), "Normalize needs one mean and one std per channel");
  for (double s : std) KILN_CHECK_VALUE(s != 0, "std evaluated to zero after conversion to float, leading to division by zero.");
  const auto c = static_cast<std::int64_t>(mean.size());
  const Tensor m = tensor(mean).view({c, 1, 1});
  const Tensor s = tensor(std).view({c, 1, 1});
  return [m, s](const Tensor& image, Rng&) {
    KILN_CHECK(image.dim() == 3 && (image.sizes()[0] == m.sizes()[0] || m.sizes()[0] == 1),
               "Normalize expects a CHW image with ", m.sizes()[0], " channels, got ", image.sizes());
    return (image - m.to(image.dtype())) / s.to(image.dtype());
  };
}

Transform RandomCrop(std::int64_t size, std::int64_t padding) {
  return [size, padding](const Tensor& image, Rng& rng) {
    KILN_CHECK(image.dim() == 3, "RandomCrop expects a CHW image, got ", image.sizes());
    Tensor padded = image;
    if (padding > 0) {
      const std::int64_t c = image.sizes()[0], h = image.sizes()[1], w = image.sizes()[2];
      padded = zeros({c, h + 2 * padding, w + 2 * padding}, image.options());
      NoGradGuard no_grad;
      padded.narrow(1, padding, h).narrow(2, padding, w).copy_(image);
    }
    const std::int64_t h = padded.sizes()[1], w = padded.sizes()[2];
    KILN_CHECK_VALUE(h >= size && w >= size, "Required crop size ", size, " is larger than the padded image ", h, "x", w);
    std::uniform_int_distribution<std::int64_t> top(0, h - size), left(0, w - size);
    const std::int64_t y = top(rng), x = left(rng);
    return padded.narrow(1, y, size).narrow(2, x, size).contiguous();
  };
}

Transform RandomHorizontalFlip(double p) {
  return [p](const Tensor& image, Rng& rng) {
    std::uniform_real_distribution<double> coin(0.0, 1.0);
    if (coin(rng) >= p) return image;
    const std::int64_t w = image.sizes().back();
    return image.index_select(-1, arange(w - 1, -1, -1));
  };
}

Transform Compose(std::vector<Transform> transforms) {
  return [transforms = std::move(transforms)](const Tensor& image, Rng& rng) {
    Tensor x = image;
    for (const Transform& t : transforms) x = t(x, rng);
    return x;
  };
}

}  // namespace kiln::data::transforms
