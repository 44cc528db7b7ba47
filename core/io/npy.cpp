// core/io/npy.cpp — reading and writing .npy files (see core/io/npy.h).
// Format: "\x93NUMPY", major, minor, a little-endian header length (2 bytes in version 1,
// 4 in versions 2 and 3), then a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } padded with spaces to a
// multiple of 64 bytes and ending in '\n', then the raw data.
#include "core/io/npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <vector>

#include "core/creation.h"
#include "core/ops/copy.h"

namespace kiln {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kMaxHeaderLen = 1 << 20;

[[noreturn]] void bad(const std::string& why) {
  detail::throw_error<ValueError>(std::source_location::current(), "load_npy: ", why);
}

DType dtype_from_descr(const std::string& descr) {
  KILN_CHECK_VALUE(descr.size() >= 3, "load_npy: unsupported dtype descr '", descr, "'");
  const char order = descr[0];
  KILN_CHECK_VALUE(order != '>', "load_npy: big-endian data ('", descr,
                   "') is not supported; save it little-endian (arr.astype('<f4'))");
  KILN_CHECK_VALUE(order == '<' || order == '|' || order == '=',
                   "load_npy: unsupported dtype descr '", descr, "'");
  const std::string kind = descr.substr(1);
  if (kind == "f4") return DType::Float32;
  if (kind == "f8") return DType::Float64;
  if (kind == "f2") return DType::Float16;
  if (kind == "i8") return DType::Int64;
  if (kind == "i4") return DType::Int32;
  if (kind == "i2") return DType::Int16;
  if (kind == "i1") return DType::Int8;
  if (kind == "u1") return DType::UInt8;
  if (kind == "b1") return DType::Bool;
  bad("unsupported dtype '" + descr + "' (Kiln reads f2, f4, f8, i1, i2, i4, i8, u1 and b1)");
}

const char* descr_of(DType t) {
  switch (t) {
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::Float16: return "<f2";
    case DType::Int64: return "<i8";
    case DType::Int32: return "<i4";
    case DType::Int16: return "<i2";
    case DType::Int8: return "|i1";
    case DType::UInt8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::BFloat16: break;
  }
  detail::throw_error<TypeError>(std::source_location::current(),
                                 "save_npy: NumPy has no bfloat16 dtype; convert with "
                                 ".to(kiln::kFloat32) first");
}

/// The text after `'key':` in the header dict, trimmed of leading spaces.
std::string value_after(const std::string& header, const std::string& key) {
  const std::string quoted = "'" + key + "'";
  const auto k = header.find(quoted);
  if (k == std::string::npos) bad("header has no '" + key + "' entry: " + header);
  auto p = header.find(':', k + quoted.size());
  if (p == std::string::npos) bad("malformed header: " + header);
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  return header.substr(p);
}

Shape parse_shape(const std::string& text) {
  if (text.empty() || text[0] != '(') bad("malformed shape in header");
  const auto close = text.find(')');
  if (close == std::string::npos) bad("malformed shape in header");
  Shape shape;
  std::size_t p = 1;
  while (p < close) {
    while (p < close && (text[p] == ' ' || text[p] == ',')) ++p;
    if (p >= close) break;
    std::int64_t v = 0;
    std::size_t digits = 0;
    while (p < close && text[p] >= '0' && text[p] <= '9') {
      if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) bad("shape value too large");
      v = v * 10 + (text[p] - '0');
      ++p;
      ++digits;
    }
    if (digits == 0) bad("malformed shape in header");
    shape.push_back(v);
    if (shape.size() > 64) bad("too many dimensions in shape");
  }
  return shape;
}

std::uint64_t checked_nbytes(const Shape& shape, DType dtype) {
  std::uint64_t n = itemsize(dtype);
  for (auto s : shape) {
    if (s != 0 && n > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(s)) {
      bad("shape is too large");
    }
    n *= static_cast<std::uint64_t>(s);
  }
  return n;
}

Shape fortran_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    strides[d] = s;
    s *= std::max<std::int64_t>(shape[d], 1);
  }
  return strides;
}

/// A bool array may only hold bytes 0 and 1: anything else would be an invalid C++ bool.
void check_bool_bytes(const NpyHeader& h, const std::uint8_t* data) {
  if (h.dtype != DType::Bool) return;
  const std::int64_t n = compute_numel(h.shape);
  for (std::int64_t i = 0; i < n; ++i) {
    if (data[i] > 1) {
      bad("bool data holds byte " + std::to_string(data[i]) + " at element " + std::to_string(i) +
          "; a bool array holds only 0 and 1");
    }
  }
}

Tensor from_parsed(const NpyHeader& h, const std::uint8_t* data, SourceSite site) {
  check_bool_bytes(h, data);
  // Read the bytes as the file laid them out, then give them the file's geometry.
  const std::int64_t n = compute_numel(h.shape);
  const Shape storage_shape = {n};
  Tensor flat = detail::tensor_from_values(data, h.dtype, storage_shape, false, h.dtype,
                                           TensorOptions(), site, "load_npy");
  const Shape strides = h.fortran_order ? fortran_strides(h.shape) : contiguous_strides(h.shape);
  return Tensor(std::make_shared<TensorImpl>(flat.impl()->storage(), h.shape, strides, 0, h.dtype,
                                             AutogradTerms{},
                                             Provenance{TensorOrigin::Created, "load_npy", site}));
}

}  // namespace

NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes) {
  if (bytes.size() < kMagicLen + 4) bad("file is too short to be a .npy file (" + std::to_string(bytes.size()) + " bytes)");
  if (std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) bad("bad magic: not a .npy file");
  const unsigned major = bytes[6];
  std::size_t len_bytes;
  if (major == 1) len_bytes = 2;
  else if (major == 2 || major == 3) len_bytes = 4;
  else bad("unsupported .npy format version " + std::to_string(major));
  if (bytes.size() < 8 + len_bytes) bad("file is truncated inside the header length");
  std::size_t header_len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<std::size_t>(bytes[8 + i]) << (8 * i);
  if (header_len > kMaxHeaderLen) bad("header length " + std::to_string(header_len) + " exceeds the 1 MiB limit");
  const std::size_t start = 8 + len_bytes;
  if (bytes.size() - start < header_len) bad("file is truncated inside the header");
  const std::string header(reinterpret_cast<const char*>(bytes.data() + start), header_len);
  NpyHeader h;
  const std::string descr_text = value_after(header, "descr");
  if (descr_text.empty() || descr_text[0] != '\'') bad("malformed descr in header");
  const auto descr_end = descr_text.find('\'', 1);
  if (descr_end == std::string::npos) bad("malformed descr in header");
  h.dtype = dtype_from_descr(descr_text.substr(1, descr_end - 1));
  const std::string fortran = value_after(header, "fortran_order");
  if (fortran.rfind("True", 0) == 0) h.fortran_order = true;
  else if (fortran.rfind("False", 0) == 0) h.fortran_order = false;
  else bad("malformed fortran_order in header");
  h.shape = parse_shape(value_after(header, "shape"));
  h.data_offset = start + header_len;
  std::int64_t extent = 1;  // the strides of even an empty array must fit in 64 bits
  for (auto s : h.shape) {
    if (__builtin_mul_overflow(extent, std::max<std::int64_t>(s, 1), &extent)) bad("shape is too large");
  }
  const std::uint64_t need = checked_nbytes(h.shape, h.dtype);
  const std::uint64_t have = bytes.size() - h.data_offset;
  if (need != have) {
    bad("the header's shape " + detail::str_cat(IntArrayRef(h.shape)) + " of " + dtype_name(h.dtype) +
        " needs " + std::to_string(need) + " bytes of data but the file holds " +
        std::to_string(have));
  }
  return h;
}

Tensor load_npy_bytes(std::span<const std::uint8_t> bytes, std::source_location loc) {
  const NpyHeader h = parse_npy_header(bytes);
  return from_parsed(h, bytes.data() + h.data_offset, loc);
}

namespace {

/// Owns a file mapping; unmapped when the last tensor over it dies.
struct Mapping {
  void* address = MAP_FAILED;
  std::size_t length = 0;
  ~Mapping() {
    if (address != MAP_FAILED) munmap(address, length);
  }
};

}  // namespace

Tensor load_npy(const std::string& path, NpyLoadOptions options, std::source_location loc) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK_VALUE(fd >= 0, "load_npy: cannot open '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    bad("cannot stat '" + path + "'");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size < kMagicLen + 4) {
    ::close(fd);
    bad("'" + path + "' is too short to be a .npy file (" + std::to_string(size) + " bytes)");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KILN_CHECK_VALUE(mapping->address != MAP_FAILED, "load_npy: cannot map '", path, "': ",
                   std::strerror(errno));
  mapping->length = size;
  const auto* bytes = static_cast<const std::uint8_t*>(mapping->address);
  const NpyHeader h = parse_npy_header({bytes, size});
  if (!options.mmap) return from_parsed(h, bytes + h.data_offset, loc);
  check_bool_bytes(h, bytes + h.data_offset);
  void* data = static_cast<std::uint8_t*>(mapping->address) + h.data_offset;
  const Shape strides = h.fortran_order ? fortran_strides(h.shape) : contiguous_strides(h.shape);
  return detail::tensor_from_memory(data, h.dtype, h.shape, IntArrayRef(strides),
                                    std::move(mapping), MemoryOrigin::MemoryMapped, TensorOptions(),
                                    loc, "load_npy");
}

void save_npy(const std::string& path, const Tensor& t) {
  const char* descr = descr_of(t.dtype());
  KILN_CHECK(!t.is_meta(), "save_npy: meta tensors have no data to save");
  const Tensor host = ops::contiguous(ops::to_device(t, kCPU, false));
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (std::int64_t d = 0; d < host.dim(); ++d) {
    header += std::to_string(host.sizes()[d]);
    if (host.dim() == 1 || d + 1 < host.dim()) header += ",";
    if (d + 1 < host.dim()) header += " ";
  }
  header += "), }";
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  const std::size_t total = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  KILN_CHECK(header.size() < 65536, "save_npy: header too long for format version 1.0");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    KILN_CHECK_VALUE(out.good(), "save_npy: cannot open '", tmp, "' for writing");
    out.write(kMagic, kMagicLen);
    const char version[2] = {1, 0};
    out.write(version, 2);
    const std::uint16_t len = static_cast<std::uint16_t>(header.size());
    const char len_le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(len_le, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(static_cast<const char*>(host.raw_data_ptr()), static_cast<std::streamsize>(host.nbytes()));
    KILN_CHECK_VALUE(out.good(), "save_npy: writing '", tmp, "' failed");
  }
  KILN_CHECK_VALUE(std::rename(tmp.c_str(), path.c_str()) == 0, "save_npy: cannot rename '", tmp,
                   "' to '", path, "': ", std::strerror(errno));
}

}  // namespace kiln
