// tests/support/fashion_files.h — a folder that looks like Fashion-MNIST to the programs
// (the four IDX files, uncompressed) but holds a few hundred small pattern images, so that
// tests can run the real training programs end to end (train_mlp, train_ddp, ...) in seconds
// and without Debian's dataset-fashion-mnist package.
//   write_fashion_files(dir, 256, 64);   // then: train_mlp --data dir --epochs 1
// Read next: data/idx.h (the format).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::testing {

namespace detail {

inline void write_big_endian(std::ofstream& out, std::uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                         static_cast<char>(v)};
  out.write(bytes, 4);
}

/// `count` 28x28 images of ten stripe patterns with a little noise, and their labels.
inline void write_split(const std::filesystem::path& dir, const std::string& prefix, std::uint32_t count,
                        std::uint32_t seed) {
  std::ofstream images(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary);
  std::ofstream labels(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  write_big_endian(images, 0x00000803);
  write_big_endian(images, count);
  write_big_endian(images, 28);
  write_big_endian(images, 28);
  write_big_endian(labels, 0x00000801);
  write_big_endian(labels, count);
  std::uint32_t state = seed * 2654435761u + 1;
  std::vector<char> pixels(28 * 28);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t label = (i * 7 + seed) % 10;
    for (std::size_t p = 0; p < pixels.size(); ++p) {
      state = state * 1664525u + 1013904223u;
      const bool stripe = ((p / 28 + p % 28 * label) / 3) % 2 == 0;
      pixels[p] = static_cast<char>((stripe ? 200 : 30) + static_cast<int>(state >> 28));
    }
    images.write(pixels.data(), static_cast<std::streamsize>(pixels.size()));
    labels.put(static_cast<char>(label));
  }
}

}  // namespace detail

/// Writes train-{images,labels} (`train_count` examples) and t10k-* (`test_count`) into `dir`.
inline void write_fashion_files(const std::filesystem::path& dir, std::uint32_t train_count,
                                std::uint32_t test_count) {
  std::filesystem::create_directories(dir);
  detail::write_split(dir, "train", train_count, 1);
  detail::write_split(dir, "t10k", test_count, 2);
}

}  // namespace kiln::testing
