// core/device.cpp — parsing and printing devices.
#include "core/device.h"

#include <charconv>

#include "core/error.h"

namespace kiln {

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
  }
  return "?";
}

Device::Device(std::string_view spec) : type_(DeviceType::CPU), index_(-1) {
  const auto colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  if (name == "cpu") {
    type_ = DeviceType::CPU;
  } else if (name == "cuda") {
    type_ = DeviceType::CUDA;
  } else if (name == "meta") {
    type_ = DeviceType::Meta;
  } else {
    KILN_FAIL("Expected one of cpu, cuda, meta device type at start of device string: ",
              spec);
  }
  if (colon == std::string_view::npos) return;
  const std::string_view digits = spec.substr(colon + 1);
  int index = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  KILN_CHECK(ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
                 index >= 0 && index < 128,
             "Invalid device string: '", spec, "'");
  KILN_CHECK(type_ == DeviceType::CUDA || index == 0, "Invalid device string: '", spec,
             "' (only cuda devices take an index other than 0)");
  index_ = static_cast<std::int8_t>(type_ == DeviceType::CPU ? -1 : index);
}

std::string Device::str() const {
  std::string s = device_type_name(type_);
  if (has_index()) {
    s.push_back(':');
    s.append(std::to_string(index_));
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

}  // namespace kiln
