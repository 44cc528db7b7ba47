// core/provenance.h — how a tensor and its memory came to be.
// Every TensorImpl records how it was made (a creation function and its call site, a view,
// an op's output, detach()), and every Storage records how its memory was made (allocated,
// a deep copy, zero-copy with an owner, borrowed, memory-mapped). Errors about a tensor quote
// this ("argument 'input' was created by from_blob at loader.cpp:42"), which turns the
// classic creation failures into one-line diagnoses. See Note [Provenance].
// Read next: core/storage.h, core/tensor_impl.h.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>

namespace kiln {

// Note [Provenance]
// ~~~~~~~~~~~~~~~~~
// Two records, because two things can differ: a view of a from_blob tensor is *made by*
// transpose but its *memory* is the caller's buffer. The tensor-level record lives in
// TensorImpl and says which call produced this handle; the memory-level record lives in
// Storage and is shared by every view. Creation functions take a defaulted
// `std::source_location` argument, which costs nothing at run time (it is a pointer to static
// data) and records the user's line, not Kiln's. Op outputs record only the op's name:
// operators such as `a + b` cannot take a defaulted argument.

/// A place in the user's source (file, line, function), or unknown.
struct SourceSite {
  const char* file = nullptr;
  std::uint32_t line = 0;
  const char* function = nullptr;

  SourceSite() = default;
  SourceSite(std::source_location loc)  // NOLINT: implicit from the defaulted argument
      : file(loc.file_name()), line(loc.line()), function(loc.function_name()) {}
  bool known() const { return file != nullptr && line != 0; }
  /// "loader.cpp:42" (the file's base name keeps messages short).
  std::string str() const;
};

/// How a tensor handle was made.
enum class TensorOrigin : std::uint8_t {
  Created,        // a creation function: tensor, from_blob, as_tensor, zeros, load_npy, ...
  View,           // view/transpose/slice/...: shares memory with another tensor
  OpOutput,       // the result of an op
  Detached,       // detach(): same memory, no autograd history
  WrappedNumber,  // a C++ number taking part in an op (lowest priority in type promotion)
};

struct Provenance {
  TensorOrigin origin = TensorOrigin::OpOutput;
  const char* api = "";  // "from_blob", "transpose", "mul", ...
  SourceSite site;
};

/// How a storage's bytes came to be.
enum class MemoryOrigin : std::uint8_t {
  Allocated,     // fresh memory from Kiln's allocator
  Copied,        // a deep copy of a caller's data (tensor(), clone(), to(), load_npy)
  ZeroCopy,      // the caller's buffer, kept alive by the owner/deleter it handed over
  Borrowed,      // the caller's buffer, with no owner: the caller must outlive every use
  MemoryMapped,  // a file mapped into memory (load_npy with mmap)
};

struct MemoryProvenance {
  MemoryOrigin origin = MemoryOrigin::Allocated;
  const char* api = "";
  SourceSite site;
};

const char* origin_name(TensorOrigin o);
const char* origin_name(MemoryOrigin o);

}  // namespace kiln
