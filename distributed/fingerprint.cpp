// distributed/fingerprint.cpp — a collective's fingerprint, its wire form and the mismatch
// message (Note [Collective fingerprints]).
#include "distributed/fingerprint.h"

#include <sstream>

namespace kiln::distributed {

namespace {

/// The DType's own name ("Float32", "BFloat16"), as the issue and the enum spell it; a
/// fingerprint from a peer with an unknown dtype is named by its number.
std::string dtype_text(DType t) {
  switch (t) {
    case DType::Float32: return "Float32";
    case DType::Float64: return "Float64";
    case DType::Float16: return "Float16";
    case DType::BFloat16: return "BFloat16";
    case DType::Int64: return "Int64";
    case DType::Int32: return "Int32";
    case DType::Int16: return "Int16";
    case DType::Int8: return "Int8";
    case DType::UInt8: return "UInt8";
    case DType::Bool: return "Bool";
  }
  return "dtype " + std::to_string(static_cast<int>(t));
}

/// 535818 -> "535,818": counts people compare at a glance.
std::string with_thousands(std::int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    const std::size_t left = digits.size() - i;  // digits from here to the end
    if (i > 0 && digits[i - 1] != '-' && left % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Barrier: return "barrier";
  }
  return "an unknown collective";
}

std::string CollectiveFingerprint::str(bool with_sequence, bool with_reduce_op) const {
  std::ostringstream os;
  os << collective_name(collective);
  if (with_sequence) os << " #" << sequence;
  if (with_reduce_op && reduce_op) os << " " << reduce_op_name(*reduce_op);
  if (collective != Collective::Barrier) {
    os << " of " << with_thousands(numel) << " " << dtype_text(dtype) << (numel == 1 ? " element" : " elements");
  }
  if (root >= 0) os << " from rank " << root;
  return os.str();
}

CollectiveFingerprint::Wire CollectiveFingerprint::to_wire() const {
  return {sequence, static_cast<std::int64_t>(collective), static_cast<std::int64_t>(dtype), numel, root,
          reduce_op ? static_cast<std::int64_t>(*reduce_op) : -1};
}

CollectiveFingerprint CollectiveFingerprint::from_wire(const Wire& words) {
  CollectiveFingerprint f;
  f.sequence = words[0];
  f.collective = static_cast<Collective>(words[1]);
  f.dtype = static_cast<DType>(words[2]);
  f.numel = words[3];
  f.root = static_cast<int>(words[4]);
  if (words[5] >= 0) f.reduce_op = static_cast<ReduceOp>(words[5]);
  return f;
}

std::optional<std::string> fingerprint_mismatch(const std::vector<CollectiveFingerprint>& by_rank) {
  for (std::size_t r = 1; r < by_rank.size(); ++r) {
    const CollectiveFingerprint &first = by_rank[0], &other = by_rank[r];
    if (other == first) continue;
    // Each side says only as much as tells them apart: the reduce op only between two
    // reductions of the same kind (a broadcast has none, which its name already says).
    const bool sequence = other.sequence != first.sequence;
    const bool reduce_op = other.collective == first.collective && other.reduce_op != first.reduce_op;
    const std::string what = other.collective == first.collective ? collective_name(first.collective) : "collective";
    std::ostringstream os;
    os << what << " #" << first.sequence << " does not match across ranks: rank " << r << " called "
       << other.str(sequence, reduce_op) << ", rank 0 " << first.str(sequence, reduce_op)
       << " (every rank must call the same collectives in the same order with the same sizes)";
    return os.str();
  }
  return std::nullopt;
}

}  // namespace kiln::distributed
