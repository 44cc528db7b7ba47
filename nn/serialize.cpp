// nn/serialize.cpp — safetensors reading and writing (see nn/serialize.h).
#include "nn/serialize.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/creation.h"
#include "core/ops/copy.h"

namespace kiln {

namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the safetensors spec's limit

[[noreturn]] void bad(const std::string& why) {
  detail::throw_error<ValueError>(std::source_location::current(), "safetensors: ", why);
}

const char* code_of(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Int64: return "I64";
    case DType::Int32: return "I32";
    case DType::Int16: return "I16";
    case DType::Int8: return "I8";
    case DType::UInt8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

DType dtype_of_code(const std::string& code) {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64, DType::Int32,
                  DType::Int16, DType::Int8, DType::UInt8, DType::Bool}) {
    if (code == code_of(t)) return t;
  }
  bad("unsupported dtype '" + code + "' (Kiln reads F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL)");
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

std::vector<Entry> parse_header(std::span<const std::uint8_t> bytes, std::uint64_t& data_start,
                                std::map<std::string, std::string>* metadata) {
  if (bytes.size() < 8) bad("file is too short (" + std::to_string(bytes.size()) + " bytes) to hold the header length");
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(bytes[static_cast<std::size_t>(i)]) << (8 * i);
  if (n > kMaxHeaderBytes) bad("header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > bytes.size() - 8) bad("header length " + std::to_string(n) + " runs past the end of the file (" +
                                std::to_string(bytes.size()) + " bytes)");
  data_start = 8 + n;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<std::ptrdiff_t>(8 + n));
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("the header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad("the header must be a JSON object");
  const std::uint64_t data_size = bytes.size() - data_start;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) bad("__metadata__ must be an object of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) bad("__metadata__ values must be strings");
        if (metadata) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const nlohmann::json& v = it.value();
    const std::string where = "tensor '" + it.key() + "': ";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      bad(where + "needs dtype, shape and data_offsets");
    }
    if (!v["dtype"].is_string()) bad(where + "dtype must be a string");
    Entry e{it.key(), dtype_of_code(v["dtype"].get<std::string>()), {}, 0, 0};
    if (!v["shape"].is_array() || v["shape"].size() > 64) bad(where + "shape must be an array of at most 64 sizes");
    std::uint64_t numel = 1;
    bool overflow = false;
    for (const auto& s : v["shape"]) {
      if (!s.is_number_unsigned()) bad(where + "shape entries must be non-negative integers");
      const std::uint64_t d = s.get<std::uint64_t>();
      if (d > static_cast<std::uint64_t>(INT64_MAX)) bad(where + "shape entry too large");
      overflow = overflow || __builtin_mul_overflow(numel, d, &numel);
      e.shape.push_back(static_cast<std::int64_t>(d));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      bad(where + "data_offsets must be [begin, end]");
    }
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    if (e.begin > e.end || e.end > data_size) {
      bad(where + "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
          "] fall outside the " + std::to_string(data_size) + " data bytes");
    }
    std::uint64_t need = 0;
    if (overflow || __builtin_mul_overflow(numel, itemsize(e.dtype), &need) || need != e.end - e.begin) {
      bad(where + "shape " + detail::str_cat(IntArrayRef(e.shape)) + " of " + v["dtype"].get<std::string>() +
          " does not match its " + std::to_string(e.end - e.begin) + " data bytes");
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < entries.size(); ++i) {
    if (entries[i].begin < entries[i - 1].end) {
      bad("tensors '" + entries[i - 1].name + "' and '" + entries[i].name + "' overlap");
    }
  }
  return entries;
}

std::vector<std::uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK_VALUE(in.good(), "safetensors: cannot open '", path, "': ", std::strerror(errno));
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

StateDict load_safetensors_bytes(std::span<const std::uint8_t> bytes) {
  std::uint64_t start = 0;
  const std::vector<Entry> entries = parse_header(bytes, start, nullptr);
  StateDict dict;
  for (const Entry& e : entries) {
    const std::uint8_t* data = bytes.data() + start + e.begin;
    if (e.dtype == DType::Bool) {
      for (std::uint64_t i = 0; i < e.end - e.begin; ++i) {
        if (data[i] > 1) bad("tensor '" + e.name + "': BOOL data holds byte " + std::to_string(data[i]) + " (only 0 and 1 are valid)");
      }
    }
    Tensor t = detail::tensor_from_values(data, e.dtype, e.shape, false, e.dtype,
                                          TensorOptions(), std::source_location::current(), "load");
    dict.insert(e.name, std::move(t));
  }
  return dict;
}

StateDict load(const std::string& path) { return load_safetensors_bytes(read_all(path)); }

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  return load_safetensors_metadata_bytes(read_all(path));
}

std::map<std::string, std::string> load_safetensors_metadata_bytes(std::span<const std::uint8_t> bytes) {
  std::uint64_t start = 0;
  std::map<std::string, std::string> metadata;
  parse_header(bytes, start, &metadata);
  return metadata;
}

namespace detail {

SafetensorsImage safetensors_image(const StateDict& dict, const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  SafetensorsImage image;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : dict) {
    KILN_CHECK(t.defined(), "save: entry '", name, "' is an undefined tensor");
    KILN_CHECK(!t.is_meta(), "save: entry '", name, "' is on the meta device and has no data");
    Tensor host = ops::contiguous(ops::to_device(t.detach(), kCPU, false));
    const std::uint64_t n = host.nbytes();
    header[name] = {{"dtype", code_of(host.dtype())},
                    {"shape", std::vector<std::int64_t>(host.sizes().begin(), host.sizes().end())},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
    image.blobs.push_back(std::move(host));
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');  // the data starts 8-byte aligned
  image.header.resize(8);
  for (int i = 0; i < 8; ++i) {
    image.header[static_cast<std::size_t>(i)] = static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  }
  image.header += text;
  return image;
}

void write_unpublished(const std::string& tmp, const SafetensorsImage& image) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  KILN_CHECK_VALUE(fd >= 0, "save: cannot create '", tmp, "': ", std::strerror(errno));
  auto write_all = [&](const void* p, std::size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const std::string why = std::strerror(errno);
        ::close(fd);
        std::remove(tmp.c_str());
        KILN_FAIL("save: writing '", tmp, "' failed: ", why);
      }
      c += w;
      n -= static_cast<std::size_t>(w);
    }
  };
  write_all(image.header.data(), image.header.size());
  for (const Tensor& b : image.blobs) write_all(b.raw_data_ptr(), b.nbytes());
  const bool synced = ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  ::close(fd);
  if (!synced) {
    std::remove(tmp.c_str());
    KILN_FAIL("save: could not flush '", tmp, "' to disk: ", why);
  }
}

void write_safetensors_unpublished(const std::string& tmp, const StateDict& dict,
                                   const std::map<std::string, std::string>& metadata) {
  write_unpublished(tmp, safetensors_image(dict, metadata));
}

void publish(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    KILN_FAIL("save: could not move '", tmp, "' into place as '", path, "': ", why);
  }
  // The rename itself lives in the folder's entries: flush them too, or a power cut can
  // still lose the new name.
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const int dir = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace detail

void save(const std::string& path, const StateDict& dict, const std::map<std::string, std::string>& metadata) {
  // Durable before visible: the rename only happens once the bytes are on disk.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  detail::write_safetensors_unpublished(tmp, dict, metadata);
  detail::publish(tmp, path);
}

}  // namespace kiln
