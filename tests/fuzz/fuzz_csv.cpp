// tests/fuzz/fuzz_csv.cpp — feeds arbitrary text to the CSV reader. The first byte picks the
// options (header or not, delimiter, a per-column dtype), so those paths are fuzzed too. Any
// input must either parse or throw kiln::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kiln.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  kiln::data::CsvOptions options;
  const std::uint8_t pick = data[0];
  options.header = (pick & 1) != 0;
  options.delimiter = (pick & 2) != 0 ? ';' : ',';
  constexpr kiln::DType kDtypes[] = {kiln::kFloat32, kiln::kFloat64, kiln::kInt64, kiln::kUInt8,
                                     kiln::kBool,    kiln::kInt32,   kiln::kHalf,  kiln::kBFloat16};
  options.default_dtype = kDtypes[(pick >> 2) & 7];
  if ((pick & 0x20) != 0) options.column_dtypes[options.header ? "a" : "1"] = kiln::kInt64;
  try {
    const auto table = kiln::data::parse_csv(
        std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), options);
    if (!table.columns.empty()) (void)table.to_tensor({}, kiln::kFloat64).sum();
  } catch (const kiln::Error&) {
    // A clear error is the expected outcome for malformed input.
  }
  return 0;
}
