// core/io/npy.h — NumPy's .npy format: load (copy, or zero-copy over a memory map) and save.
//
//   auto a = kiln::load_npy("x.npy");                 // a copy; the file can go away
//   auto b = kiln::load_npy("x.npy", {.mmap = true}); // zero-copy: pages come from the file
//   kiln::save_npy("y.npy", b * 2);
//
// A Fortran-order file becomes a non-contiguous view (strides reversed), which is the
// contiguity lesson from the reference articles made visible: `b.is_contiguous()` is false
// until you call `contiguous()`. Truncated files, bad magic, unsupported dtypes and headers
// whose shape disagrees with the file size throw ValueError; nothing is read past the end.
// Read next: core/creation.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <span>
#include <string>

#include "core/tensor.h"

namespace kiln {

struct NpyLoadOptions {
  /// Map the file instead of reading it. The mapping is private (copy-on-write): writing to
  /// the tensor never changes the file. It stays mapped while any tensor or view uses it.
  bool mmap = false;
};

/// What a .npy header says.
struct NpyHeader {
  DType dtype = DType::Float32;
  Shape shape;
  bool fortran_order = false;
  std::size_t data_offset = 0;  // bytes from the start of the file to the data
};

/// Parses and validates the header of an in-memory .npy file (`bytes` is the whole file).
NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes);

Tensor load_npy(const std::string& path, NpyLoadOptions options = {},
                std::source_location loc = std::source_location::current());
/// Loads from an in-memory .npy file (always a copy).
Tensor load_npy_bytes(std::span<const std::uint8_t> bytes,
                      std::source_location loc = std::source_location::current());

/// Writes a version 1.0 .npy file NumPy reads (C order, little-endian). BFloat16 has no NumPy
/// dtype and is refused. The file is written to a temporary name and renamed into place.
void save_npy(const std::string& path, const Tensor& t);

}  // namespace kiln
