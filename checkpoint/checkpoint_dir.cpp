// checkpoint/checkpoint_dir.cpp — writing, pruning, checking and resuming checkpoints (see
// checkpoint/checkpoint_dir.h and Note [A checkpoint folder holds one run]).
#include "checkpoint/checkpoint_dir.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string_view>

#include "core/warning.h"
#include "nn/serialize.h"

namespace kiln::checkpoint {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "kiln.training_checkpoint.v2";
// v1 checksummed the tensor data alone; such checkpoints still resume.
constexpr const char* kFormatV1 = "kiln.training_checkpoint.v1";
constexpr const char* kValuePrefix = "value.";
constexpr const char* kChecksumKey = "kiln.checksum";
// What the checksum field holds while the checksum is computed: as long as the real value,
// so the header's length and every offset stay the same.
constexpr const char* kChecksumPlaceholder = "crc32:00000000";

/// "checkpoint-<step>.safetensors" (the step zero-padded, so names sort by step too).
std::string file_name(std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%012" PRId64 ".safetensors", step);
  return name;
}

std::uint32_t crc_update(std::uint32_t crc, const void* data, std::size_t n) {
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}

std::string crc_text(std::uint32_t crc) {
  char text[16];
  std::snprintf(text, sizeof text, "crc32:%08" PRIx32, crc);
  return text;
}

/// v1's checksum: every entry's bytes, contiguous and in dict order.
std::uint32_t data_crc(const StateDict& dict) {
  std::uint32_t crc = crc_update(0, nullptr, 0);
  for (const auto& [name, value] : dict) {
    const Tensor host = value.detach().to(kCPU).contiguous();
    crc = crc_update(crc, host.raw_data_ptr(), host.nbytes());
  }
  return crc;
}

/// Where the checksum field's value sits in the file's header: the one place the JSON holds
/// `"kiln.checksum":"<value>"`; npos when it is not there exactly once.
std::size_t checksum_position(std::string_view header, const std::string& value) {
  const std::string field = std::string("\"") + kChecksumKey + "\":\"" + value + "\"";
  const std::size_t at = header.find(field);
  if (at == std::string_view::npos || header.find(field, at + 1) != std::string_view::npos) {
    return std::string_view::npos;
  }
  return at + field.size() - 1 - value.size();
}

[[noreturn]] void invalid(const std::string& file, const std::string& why) {
  detail::throw_error<ValueError>(std::source_location::current(), "checkpoint '", file, "': ", why);
}

std::string file_name_of(const std::string& path) { return fs::path(path).filename().string(); }

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
    if (e.is_regular_file() && std::regex_match(name, m, pattern) && m[1].length() <= 18) {
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
  std::vector<std::string> others;
  if (!continues_run_) {
    others = list();
    KILN_CHECK_VALUE(others.empty() || options_.overwrite, "CheckpointDir: '", path_,
                     "' holds another run's checkpoints (", others.size(), ", the newest ", file_name_of(others.back()),
                     "): call resume() to continue that run, or set CheckpointDirOptions::overwrite to replace it");
  }
  const StateDict dict = collect(state);
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : state.values) metadata[kValuePrefix + key] = value;
  metadata["kiln.format"] = kFormat;
  metadata["kiln.step"] = std::to_string(step);
  metadata[kChecksumKey] = kChecksumPlaceholder;
  kiln::detail::SafetensorsImage image = kiln::detail::safetensors_image(dict, metadata);
  const std::size_t at = checksum_position(image.header, kChecksumPlaceholder);
  KILN_CHECK(at != std::string::npos, "CheckpointDir.save: a value's text repeats the checksum field");
  std::uint32_t crc = crc_update(crc_update(0, nullptr, 0), image.header.data(), image.header.size());
  for (const Tensor& blob : image.blobs) crc = crc_update(crc, blob.raw_data_ptr(), blob.nbytes());
  const std::string checksum = crc_text(crc);
  image.header.replace(at, checksum.size(), checksum);

  const std::string file = (fs::path(path_) / file_name(step)).string();
  const std::string unpublished = file + ".tmp." + std::to_string(::getpid());
  kiln::detail::write_unpublished(unpublished, image);
  if (options_.before_publish) options_.before_publish(unpublished);
  kiln::detail::publish(unpublished, file);
  // The other run's files go only once this run has a checkpoint of its own.
  for (const std::string& other : others) {
    if (other != file) fs::remove(other);
  }
  continues_run_ = true;

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
  std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  Contents contents;
  std::map<std::string, std::string> metadata;
  try {
    metadata = load_safetensors_metadata_bytes(bytes);
    contents.tensors = load_safetensors_bytes(bytes);
  } catch (const Error& e) {
    invalid(file, e.message());
  }
  const std::string format = metadata["kiln.format"];
  if (format == kFormat) {
    // The header's length was checked by the reads above.
    std::uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[static_cast<std::size_t>(i)];
    const std::string recorded = metadata[kChecksumKey];
    const std::string_view header(reinterpret_cast<const char*>(bytes.data()), 8 + header_bytes);
    const std::size_t at = recorded.size() == std::strlen(kChecksumPlaceholder)
                               ? checksum_position(header, recorded)
                               : std::string_view::npos;
    if (at == std::string_view::npos) invalid(file, "its checksum field is missing or malformed");
    std::memcpy(bytes.data() + at, kChecksumPlaceholder, recorded.size());
    const std::string computed = crc_text(crc_update(crc_update(0, nullptr, 0), bytes.data(), bytes.size()));
    if (computed != recorded) {
      invalid(file, "its bytes do not match its checksum (" + computed + ", recorded " + recorded +
                        "): the file was changed after it was written");
    }
  } else if (format == kFormatV1) {
    const std::string expected_crc = std::to_string(data_crc(contents.tensors));
    if (metadata["kiln.data_crc32"] != expected_crc) {
      invalid(file, "its data does not match its checksum (CRC-32 " + expected_crc + ", recorded " +
                        metadata["kiln.data_crc32"] + "): the file was corrupted after it was written");
    }
  } else {
    invalid(file, "is not a Kiln training checkpoint (its format is '" + format + "', expected '" + kFormat + "')");
  }
  const std::string& step = metadata["kiln.step"];
  const char* end = step.data() + step.size();
  const auto [ptr, error] = std::from_chars(step.data(), end, contents.step);
  if (error != std::errc() || ptr != end || step.empty() || contents.step < 0) {
    invalid(file, "has no valid kiln.step (found '" + step + "')");
  }
  for (const auto& [key, value] : metadata) {
    if (key.rfind(kValuePrefix, 0) == 0) contents.values[key.substr(std::string(kValuePrefix).size())] = value;
  }
  return contents;
}

std::optional<CheckpointDir::Found> CheckpointDir::latest() {
  continues_run_ = true;
  const std::vector<std::string> files = list();
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      return Found{*it, read(*it)};
    } catch (const Error& e) {
      const std::string aside = *it + ".unusable";
      std::error_code error;
      fs::rename(*it, aside, error);
      warn("skipping an unusable checkpoint: " + e.message() +
           (error ? "" : "; renamed to " + file_name_of(aside)) +
           (std::next(it) != files.rend() ? "; trying the one before it" : ""));
    }
  }
  return std::nullopt;
}

std::optional<std::string> CheckpointDir::resume(TrainingState& state) {
  std::optional<Found> found = latest();
  if (!found) return std::nullopt;
  restore(state, found->contents.tensors);
  state.values = std::move(found->contents.values);
  return found->path;
}

}  // namespace kiln::checkpoint
