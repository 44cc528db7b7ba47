// data/idx.h — the IDX format of MNIST and Fashion-MNIST (plain or gzipped), and the
// datasets built on it. Files are validated before use: magic, type code, dimension count,
// and dims that must account for exactly the bytes in the file (a truncated file or a lying
// header is an error, never a short read).
//
//   auto train = kiln::data::FashionMNIST::load(/*train=*/true);   // /usr/share/datasets/fashion-mnist
//   std::cout << train->size();                                     // 60000
//
// Read next: data/csv.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "data/dataset.h"

namespace kiln::data {

/// Parses an IDX file already in memory: UInt8/Int8/Int16/Int32/Float32/Float64 data with
/// the file's dims (big-endian values are converted).
Tensor parse_idx(std::span<const std::uint8_t> bytes, const std::string& what = "IDX data");
/// Reads an IDX file, gunzipping it when it ends in .gz.
Tensor read_idx(const std::string& path);

/// Where Debian's dataset-fashion-mnist package installs the data; the KILN_FASHION_MNIST
/// environment variable overrides it.
std::string default_fashion_mnist_root();

/// MNIST-format images [N, 28, 28] (UInt8 in memory) and labels [N] (Int64). get() returns
/// the image as Float32 [1, 28, 28] in [0, 1] (ToTensor's convention) and the label.
class MNIST : public Dataset {
 public:
  /// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `root`; a missing file is
  /// an error that names the Debian package to install.
  static std::shared_ptr<MNIST> load(const std::string& root, bool train);
  MNIST(Tensor images, Tensor labels);
  std::size_t size() const override;
  Example get(std::size_t index) const override;
  Example get_batch(const std::vector<std::size_t>& indices) const override;
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }

 private:
  Tensor images_, labels_;
};

/// Fashion-MNIST: the same format, ten classes of clothing.
struct FashionMNIST {
  static std::shared_ptr<MNIST> load(bool train, const std::string& root = default_fashion_mnist_root()) {
    return MNIST::load(root, train);
  }
  static const char* class_name(std::int64_t label);
};

}  // namespace kiln::data
