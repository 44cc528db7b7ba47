// nn/serialize.h — checkpoints in the safetensors format, so they open in PyTorch/NumPy
// tooling (safetensors.torch.load_file) and PyTorch checkpoints exported to safetensors load
// here. Layout: 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}), then the raw little-endian data.
//
//   kiln::save("model.safetensors", model.state_dict());
//   model.load_state_dict(kiln::load("model.safetensors"));
//
// Saving is atomic (a temporary file, fsync, rename, then fsync of the folder): a crash
// mid-save leaves the old checkpoint intact. Loading validates everything before reading: header length, JSON,
// dtypes, shapes, offsets inside the file and matching the shape, no overlaps.
// Read next: nn/module.h (state_dict, load_state_dict).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "nn/module.h"

namespace kiln {

/// Writes `dict` to `path` (F32/F64/F16/BF16/I64/I32/I16/I8/U8/BOOL), atomically.
void save(const std::string& path, const StateDict& dict,
          const std::map<std::string, std::string>& metadata = {});
/// Reads a safetensors file (entries in file order, which save() writes in state_dict order).
StateDict load(const std::string& path);
/// Reads safetensors bytes already in memory (the fuzz target's entry point).
StateDict load_safetensors_bytes(std::span<const std::uint8_t> bytes);
/// The "__metadata__" strings of a safetensors file.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);
/// The same, from bytes already in memory.
std::map<std::string, std::string> load_safetensors_metadata_bytes(std::span<const std::uint8_t> bytes);

namespace detail {
/// The bytes save() writes, before they are written: the 8-byte length and the JSON header
/// (padded so the data starts 8-byte aligned), then every entry's data as a contiguous host
/// tensor, in dict order. checkpoint/ checksums it whole before writing it.
struct SafetensorsImage {
  std::string header;
  std::vector<Tensor> blobs;
};
SafetensorsImage safetensors_image(const StateDict& dict, const std::map<std::string, std::string>& metadata);
/// save()'s two halves: write the image to `tmp` and flush it to disk (nothing at its final
/// name yet), then rename it to `path` and flush the folder. checkpoint/ runs them apart.
void write_unpublished(const std::string& tmp, const SafetensorsImage& image);
void write_safetensors_unpublished(const std::string& tmp, const StateDict& dict,
                                   const std::map<std::string, std::string>& metadata);
void publish(const std::string& tmp, const std::string& path);
}  // namespace detail

}  // namespace kiln
