// checkpoint/checkpoint_dir.cpp — writing, pruning, checking and resuming checkpoints (see
// checkpoint/checkpoint_dir.h).
#include "checkpoint/checkpoint_dir.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include "core/warning.h"
#include "nn/serialize.h"

namespace kiln::checkpoint {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "kiln.training_checkpoint.v1";
constexpr const char* kValuePrefix = "value.";

/// "checkpoint-<step>.safetensors" (the step zero-padded, so names sort by step too).
std::string file_name(std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%012" PRId64 ".safetensors", step);
  return name;
}

std::uint32_t crc_update(std::uint32_t crc, const void* data, std::size_t n) {
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

/// The CRC-32 of what save() writes as the data section: every entry's bytes, contiguous and
/// in dict order, which is how nn/serialize.cpp lays them out.
std::uint32_t data_crc(const nn::StateDict& dict) {
  std::uint32_t crc = crc_update(0, nullptr, 0);
  for (const auto& [name, value] : dict) {
    const Tensor host = value.detach().to(kCPU).contiguous();
    crc = crc_update(crc, host.raw_data_ptr(), host.nbytes());
  }
  return crc;
}

[[noreturn]] void invalid(const std::string& file, const std::string& why) {
  detail::throw_error<ValueError>(std::source_location::current(), "checkpoint '", file, "': ", why);
}

}  // namespace

CheckpointDir::CheckpointDir(std::string path, CheckpointDirOptions options)
    : path_(std::move(path)), options_(std::move(options)) {
  KILN_CHECK_VALUE(!path_.empty(), "CheckpointDir: the folder path is empty");
  std::error_code error;
  fs::create_directories(path_, error);
  KILN_CHECK_VALUE(!error && fs::is_directory(path_), "CheckpointDir: cannot create the folder '", path_, "': ",
                   error ? error.message() : "a file of that name is in the way");
}

std::vector<std::string> CheckpointDir::list() const {
  static const std::regex pattern(R"(checkpoint-(\d+)\.safetensors)");
  std::vector<std::pair<std::int64_t, std::string>> found;
  for (const fs::directory_entry& e : fs::directory_iterator(path_)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(name, m, pattern)) {
      found.emplace_back(std::stoll(m[1].str()), e.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, file] : found) out.push_back(std::move(file));
  return out;
}

std::string CheckpointDir::save(std::int64_t step, const TrainingState& state) {
  KILN_CHECK_VALUE(step >= 0, "CheckpointDir.save: step must be non-negative, got ", step);
  const nn::StateDict dict = collect(state);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : state.values) metadata[kValuePrefix + key] = value;
  metadata["kiln.format"] = kFormat;
  metadata["kiln.step"] = std::to_string(step);
  metadata["kiln.data_crc32"] = std::to_string(data_crc(dict));
  const std::string file = (fs::path(path_) / file_name(step)).string();
  const std::string unpublished = file + ".tmp." + std::to_string(::getpid());
  kiln::detail::write_safetensors_unpublished(unpublished, dict, metadata);
  if (options_.before_publish) options_.before_publish(unpublished);
  kiln::detail::publish(unpublished, file);

  // Older checkpoints beyond keep_last, and temporary files a killed run left behind.
  std::vector<std::string> all = list();
  if (options_.keep_last > 0 && all.size() > options_.keep_last) {
    for (std::size_t i = 0; i + options_.keep_last < all.size(); ++i) fs::remove(all[i]);
  }
  for (const fs::directory_entry& e : fs::directory_iterator(path_)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint-", 0) == 0 && name.find(".safetensors.tmp.") != std::string::npos) {
      std::error_code ignored;
      fs::remove(e.path(), ignored);
    }
  }
  return file;
}

CheckpointDir::Contents CheckpointDir::read(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in.good()) invalid(file, "cannot be opened");
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  Contents contents;
  std::map<std::string, std::string> metadata;
  try {
    metadata = load_safetensors_metadata_bytes(bytes);
    contents.tensors = load_safetensors_bytes(bytes);
  } catch (const Error& e) {
    invalid(file, e.message());
  }
  if (metadata["kiln.format"] != kFormat) {
    invalid(file, "is not a Kiln training checkpoint (its format is '" + metadata["kiln.format"] + "', expected '" +
                      kFormat + "')");
  }
  const std::string expected_crc = std::to_string(data_crc(contents.tensors));
  if (metadata["kiln.data_crc32"] != expected_crc) {
    invalid(file, "its data does not match its checksum (CRC-32 " + expected_crc + ", recorded " +
                      metadata["kiln.data_crc32"] + "): the file was corrupted after it was written");
  }
  try {
    contents.step = std::stoll(metadata.at("kiln.step"));
  } catch (const std::exception&) {
    invalid(file, "has no valid kiln.step");
  }
  for (const auto& [key, value] : metadata) {
    if (key.rfind(kValuePrefix, 0) == 0) contents.values[key.substr(std::string(kValuePrefix).size())] = value;
  }
  return contents;
}

std::optional<std::string> CheckpointDir::resume(TrainingState& state) {
  const std::vector<std::string> files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    Contents contents;
    try {
      contents = read(*it);
    } catch (const Error& e) {
      warn("skipping an unusable checkpoint: " + e.message() +
           (std::next(it) != files.rend() ? "; trying the one before it" : ""));
      continue;
    }
    restore(state, contents.tensors);
    state.values = std::move(contents.values);
    return *it;
  }
  return std::nullopt;
}

}  // namespace kiln::checkpoint
