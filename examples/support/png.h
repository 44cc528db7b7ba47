// examples/support/png.h — a small grayscale PNG writer over zlib (what the FGSM example
// needs to show its images), and a 3x5 pixel font for the digits of predicted labels.
// A PNG is a signature and chunks (length, type, data, CRC-32); the pixels are one IDAT
// chunk: each row prefixed by filter type 0, the whole zlib-compressed.
// Read next: examples/fgsm.cpp.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::examples {

/// An 8-bit grayscale image, row-major.
struct GrayImage {
  int width = 0, height = 0;
  std::vector<std::uint8_t> pixels;
  GrayImage(int w, int h, std::uint8_t fill = 0)
      : width(w), height(h), pixels(static_cast<std::size_t>(w) * static_cast<std::size_t>(h), fill) {}
  std::uint8_t& at(int x, int y) { return pixels[static_cast<std::size_t>(y) * width + x]; }
};

namespace png_detail {

inline void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

inline void chunk(std::vector<std::uint8_t>& out, const char* type, const std::vector<std::uint8_t>& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  // The CRC covers the type and the data, not the length.
  const uLong crc = crc32(crc32(0L, Z_NULL, 0), out.data() + type_at, static_cast<uInt>(4 + data.size()));
  put_u32(out, static_cast<std::uint32_t>(crc));
}

}  // namespace png_detail

/// Writes `image` as a PNG file; throws std::runtime_error when it cannot.
inline void write_png(const std::string& path, const GrayImage& image) {
  using namespace png_detail;
  std::vector<std::uint8_t> raw;
  raw.reserve(image.pixels.size() + static_cast<std::size_t>(image.height));
  for (int y = 0; y < image.height; ++y) {
    raw.push_back(0);  // filter: none
    const auto row = image.pixels.begin() + static_cast<std::ptrdiff_t>(y) * image.width;
    raw.insert(raw.end(), row, row + image.width);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> packed(packed_size);
  if (compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK) {
    throw std::runtime_error("write_png: zlib compression failed");
  }
  packed.resize(packed_size);

  std::vector<std::uint8_t> header;
  put_u32(header, static_cast<std::uint32_t>(image.width));
  put_u32(header, static_cast<std::uint32_t>(image.height));
  header.insert(header.end(), {8, 0, 0, 0, 0});  // 8-bit, grayscale, deflate, filter 0, no interlace

  std::vector<std::uint8_t> file = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  chunk(file, "IHDR", header);
  chunk(file, "IDAT", packed);
  chunk(file, "IEND", {});
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  if (!out) throw std::runtime_error("write_png: cannot write '" + path + "'");
}

/// Draws the decimal digit `d` at (x, y) in a 3x5 pixel font, each font pixel `scale` wide.
inline void draw_digit(GrayImage& image, int d, int x, int y, int scale, std::uint8_t value) {
  // Rows of 3 bits, top to bottom, for 0-9.
  static const std::uint8_t font[10][5] = {
      {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1},
      {7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 2, 2, 2}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}};
  for (int row = 0; row < 5; ++row) {
    for (int col = 0; col < 3; ++col) {
      if (((font[d][row] >> (2 - col)) & 1) == 0) continue;
      for (int dy = 0; dy < scale; ++dy) {
        for (int dx = 0; dx < scale; ++dx) {
          const int px = x + col * scale + dx, py = y + row * scale + dy;
          if (px >= 0 && py >= 0 && px < image.width && py < image.height) image.at(px, py) = value;
        }
      }
    }
  }
}

}  // namespace kiln::examples
