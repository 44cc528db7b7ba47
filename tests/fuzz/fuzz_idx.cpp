// tests/fuzz/fuzz_idx.cpp — feeds arbitrary bytes to the IDX (MNIST) reader. Any input must
// either parse or throw kiln::Error: never crash, hang, or read past the end.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    kiln::Tensor t = kiln::data::parse_idx(std::span<const std::uint8_t>(data, size), "fuzz input");
    if (t.numel() > 0) (void)t.to(kiln::kFloat64).sum();  // touch every element
  } catch (const kiln::Error&) {
    // A clear error is the expected outcome for malformed input.
  }
  return 0;
}
