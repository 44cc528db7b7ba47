// core/provenance.cpp — text for provenance records.
#include "core/provenance.h"

#include <cstring>

namespace kiln {

std::string SourceSite::str() const {
  if (!known()) return "an unknown place";
  const char* base = std::strrchr(file, '/');
  return std::string(base ? base + 1 : file) + ":" + std::to_string(line);
}

const char* origin_name(TensorOrigin o) {
  switch (o) {
    case TensorOrigin::Created: return "created";
    case TensorOrigin::View: return "view";
    case TensorOrigin::OpOutput: return "op output";
    case TensorOrigin::Detached: return "detached";
    case TensorOrigin::WrappedNumber: return "wrapped number";
  }
  return "?";
}

const char* origin_name(MemoryOrigin o) {
  switch (o) {
    case MemoryOrigin::Allocated: return "allocated";
    case MemoryOrigin::Copied: return "copied";
    case MemoryOrigin::ZeroCopy: return "zero-copy";
    case MemoryOrigin::Borrowed: return "borrowed";
    case MemoryOrigin::MemoryMapped: return "memory-mapped";
  }
  return "?";
}

}  // namespace kiln
