// core/device.h — where a tensor's memory lives: `cpu`, `cuda:N`, or `meta` (shapes and
// dtypes only, no data, so device and shape rules can be tested without a GPU).
// Read next: core/allocator.h (how memory for a device is obtained).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace kiln {

enum class DeviceType : std::int8_t { CPU, CUDA, Meta };
inline constexpr int kNumDeviceTypes = 3;

/// A device type plus an index (-1 = "the current one", meaningful for CUDA only).
///
///   Device d("cuda:1");   // d.type() == DeviceType::CUDA, d.index() == 1
///   std::cout << d;       // cuda:1
class Device {
 public:
  constexpr Device(DeviceType type = DeviceType::CPU, int index = -1)  // NOLINT: implicit
      : type_(type), index_(static_cast<std::int8_t>(type == DeviceType::CPU ? -1 : index)) {}
  /// Parses "cpu", "cuda", "cuda:1", "meta"; PyTorch's error for anything else.
  explicit Device(std::string_view spec);
  Device(const char* spec) : Device(std::string_view(spec)) {}  // NOLINT: implicit, like torch

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool has_index() const { return index_ >= 0; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  constexpr bool is_meta() const { return type_ == DeviceType::Meta; }
  std::string str() const;

  friend constexpr bool operator==(Device a, Device b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }

 private:
  DeviceType type_;
  std::int8_t index_;
};

inline constexpr Device kCPU{DeviceType::CPU};
inline constexpr Device kMeta{DeviceType::Meta};
inline constexpr Device kCUDA{DeviceType::CUDA, 0};

const char* device_type_name(DeviceType t);
std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace kiln
