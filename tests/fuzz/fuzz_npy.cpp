// tests/fuzz/fuzz_npy.cpp — feeds arbitrary bytes to the .npy reader. Any input must either
// load or throw kiln::Error: never crash, hang, or read past the end (AddressSanitizer
// watches the reads).
#include <cstddef>
#include <cstdint>
#include <span>

#include "kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kiln::Tensor t = kiln::load_npy_bytes(std::span<const std::uint8_t>(data, size));
    if (t.numel() > 0) (void)t.contiguous().sum();  // touch every element
  } catch (const kiln::Error&) {
    // A clear error is the expected outcome for malformed input.
  }
  return 0;
}
