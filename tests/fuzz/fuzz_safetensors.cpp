// tests/fuzz/fuzz_safetensors.cpp — feeds arbitrary bytes to the safetensors reader (header
// length, JSON header, offsets, dtypes). Any input must either load or throw kiln::Error:
// never crash, hang, or read past the end.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const kiln::StateDict dict = kiln::load_safetensors_bytes(std::span<const std::uint8_t>(data, size));
    for (const auto& [name, t] : dict) {
      if (t.numel() > 0) (void)t.to(kiln::kFloat64).sum();  // touch every element
    }
  } catch (const kiln::Error&) {
    // A clear error is the expected outcome for malformed input.
  }
  return 0;
}
