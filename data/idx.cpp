// data/idx.cpp — IDX parsing and the MNIST datasets.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "core/creation.h"
#include "core/grad_mode.h"

namespace kiln::data {

namespace {

constexpr std::size_t kMaxFileBytes = std::size_t{4} << 30;

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  detail::throw_error<ValueError>(std::source_location::current(), what, ": ", why);
}

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::vector<std::uint8_t> out;
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) {
    gzFile f = gzopen(path.c_str(), "rb");
    KILN_CHECK_VALUE(f != nullptr, "cannot open '", path, "': ", std::strerror(errno));
    std::uint8_t buf[1 << 16];
    int n = 0;
    while ((n = gzread(f, buf, sizeof buf)) > 0) {
      out.insert(out.end(), buf, buf + n);
      if (out.size() > kMaxFileBytes) {
        gzclose(f);
        bad(path, "decompressed data exceeds 4 GiB");
      }
    }
    int err = 0;
    const char* msg = gzerror(f, &err);
    const std::string why = err != Z_OK && err != Z_STREAM_END ? msg : "";
    gzclose(f);
    if (n < 0 || !why.empty()) bad(path, "corrupt gzip data (" + why + ")");
    return out;
  }
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK_VALUE(in.good(), "cannot open '", path, "': ", std::strerror(errno));
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

Tensor parse_idx(std::span<const std::uint8_t> b, const std::string& what) {
  if (b.size() < 4) bad(what, "too short for an IDX header (" + std::to_string(b.size()) + " bytes)");
  if (b[0] != 0 || b[1] != 0) bad(what, "bad magic number: not an IDX file");
  DType dtype;
  std::size_t item;
  switch (b[2]) {
    case 0x08: dtype = kUInt8; item = 1; break;
    case 0x09: dtype = kInt8; item = 1; break;
    case 0x0B: dtype = kInt16; item = 2; break;
    case 0x0C: dtype = kInt32; item = 4; break;
    case 0x0D: dtype = kFloat32; item = 4; break;
    case 0x0E: dtype = kFloat64; item = 8; break;
    default: bad(what, "unknown IDX type code " + std::to_string(b[2]));
  }
  const std::size_t ndim = b[3];
  if (ndim == 0 || ndim > 8) bad(what, "an IDX file has 1 to 8 dims, this header says " + std::to_string(ndim));
  if (b.size() < 4 + 4 * ndim) bad(what, "file is truncated inside its header");
  Shape shape;
  std::uint64_t count = 1;
  for (std::size_t d = 0; d < ndim; ++d) {
    const std::uint8_t* p = b.data() + 4 + 4 * d;
    const std::uint64_t v = (std::uint64_t{p[0]} << 24) | (std::uint64_t{p[1]} << 16) | (std::uint64_t{p[2]} << 8) | p[3];
    shape.push_back(static_cast<std::int64_t>(v));
    if (__builtin_mul_overflow(count, v, &count)) bad(what, "dims overflow");
  }
  const std::size_t offset = 4 + 4 * ndim;
  std::uint64_t need = 0;
  if (__builtin_mul_overflow(count, item, &need) || need != b.size() - offset) {
    bad(what, "the header's dims " + detail::str_cat(IntArrayRef(shape)) + " need " + std::to_string(need) +
                  " bytes of data but the file holds " + std::to_string(b.size() - offset));
  }
  std::vector<std::uint8_t> data(b.begin() + static_cast<std::ptrdiff_t>(offset), b.end());
  // IDX is big-endian; reverse each element's bytes in place.
  if (item > 1) {
    for (std::size_t i = 0; i < data.size(); i += item) std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i), data.begin() + static_cast<std::ptrdiff_t>(i + item));
  }
  return detail::tensor_from_values(data.data(), dtype, shape, false, dtype, TensorOptions(),
                                    std::source_location::current(), "read_idx");
}

Tensor read_idx(const std::string& path) { return parse_idx(read_file(path), "'" + path + "'"); }

std::string default_fashion_mnist_root() {
  if (const char* env = std::getenv("KILN_FASHION_MNIST")) return env;
  return "/usr/share/datasets/fashion-mnist";
}

std::shared_ptr<MNIST> MNIST::load(const std::string& root, bool train) {
  const std::string prefix = root + "/" + (train ? "train" : "t10k");
  auto find = [&](const std::string& stem) {
    for (const std::string& p : {prefix + stem + ".gz", prefix + stem}) {
      if (std::filesystem::exists(p)) return p;
    }
    KILN_CHECK_VALUE(false, "dataset file not found: looked for ", prefix, stem, "[.gz]. Fashion-MNIST is in "
                     "Debian's dataset-fashion-mnist package (apt-get install dataset-fashion-mnist), installed under "
                     "/usr/share/datasets/fashion-mnist; set KILN_FASHION_MNIST to use another directory");
    return std::string();
  };
  Tensor images = read_idx(find("-images-idx3-ubyte"));
  Tensor labels = read_idx(find("-labels-idx1-ubyte"));
  KILN_CHECK_VALUE(images.dim() == 3 && images.dtype() == kUInt8, "MNIST images must be UInt8 [N, H, W], got ",
                   images.dtype(), " ", images.sizes());
  KILN_CHECK_VALUE(labels.dim() == 1 && labels.sizes()[0] == images.sizes()[0], "MNIST: ", images.sizes()[0],
                   " images but ", labels.sizes(), " labels");
  return std::make_shared<MNIST>(images, labels.to(kInt64));
}

MNIST::MNIST(Tensor images, Tensor labels) : images_(std::move(images)), labels_(std::move(labels)) {}

std::size_t MNIST::size() const { return static_cast<std::size_t>(images_.sizes()[0]); }

Example MNIST::get(std::size_t index) const {
  KILN_CHECK_INDEX(index < size(), "index ", index, " is out of range for a dataset of ", size(), " samples");
  const auto i = static_cast<std::int64_t>(index);
  // ToTensor's convention: CHW Float32 in [0, 1].
  return {images_.select(0, i).unsqueeze(0).to(kFloat32) / 255.0, labels_.select(0, i)};
}

Example MNIST::get_batch(const std::vector<std::size_t>& indices) const {
  std::vector<std::int64_t> idx(indices.begin(), indices.end());
  const Tensor index = tensor(idx);
  return {images_.index_select(0, index).unsqueeze(1).to(kFloat32) / 255.0, labels_.index_select(0, index)};
}

const char* FashionMNIST::class_name(std::int64_t label) {
  static const char* names[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return label >= 0 && label < 10 ? names[label] : "?";
}

}  // namespace kiln::data
