// data/transforms.h — the image transforms of torchvision, as Transform functions that draw
// any randomness from the per-sample stream TransformDataset gives them.
//
//   auto augmented = std::make_shared<kiln::data::TransformDataset>(train, kiln::data::transforms::Compose({
//       kiln::data::transforms::RandomCrop(28, 4), kiln::data::transforms::RandomHorizontalFlip(),
//       kiln::data::transforms::Normalize({0.2860}, {0.3530})}));
//
// Read next: data/dataloader.h.
#pragma once

#include <vector>

#include "data/dataset.h"

namespace kiln::data::transforms {

/// HWC (or HW) UInt8 image -> CHW Float32 in [0, 1].
Transform ToTensor();
/// (x - mean[c]) / std[c] per channel of a CHW image.
Transform Normalize(std::vector<double> mean, std::vector<double> std);
/// Pads each side with `padding` zeros, then crops a random size x size window.
Transform RandomCrop(std::int64_t size, std::int64_t padding = 0);
/// Mirrors the image left-right with probability p.
Transform RandomHorizontalFlip(double p = 0.5);
/// Applies the transforms in order.
Transform Compose(std::vector<Transform> transforms);

}  // namespace kiln::data::transforms
