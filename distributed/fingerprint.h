// distributed/fingerprint.h — what one rank says about a collective before any of its data
// moves: which collective, the how-many-th of its group, the dtype and element count, the
// root. The ranks swap fingerprints and refuse a collective whose fingerprints differ, naming
// both sides, so that mismatched ranks get an error instead of corrupting each other's memory.
// The MPI backend swaps them (distributed/mpi/process_group_mpi.cpp); the type and the text
// live here so that another backend would word a mismatch the same way.
// Read next: distributed/process_group_mpi.h (Note [Two threads talk to MPI]).
//
// Note [Collective fingerprints]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Collectives are matched by order alone. If rank 1 calls a
// 1-element all_reduce where rank 0 calls a 535,818-element one, MPI pairs them anyway, and
// the larger side's data lands in the smaller side's buffer: heap corruption, a signal, or a
// hang, depending on the sizes. So before a collective is posted, every rank sends its
// fingerprint (six 64-bit words) to every peer and waits for theirs on a communicator used for
// nothing else, where messages between a pair arrive in the order they were sent: the k-th
// fingerprint received from a peer is its k-th collective. Every rank then holds all the
// fingerprints and reaches the same verdict; on a mismatch no rank posts the collective, each
// fails it with the same message (DistBackendError), and the group stays usable for the
// collectives that follow. The ranks must agree on sizes, not shapes: MPI and NCCL see only
// element counts, so a [2, 3] tensor meets a [6] one without harm. The cost is one small
// message to and from each peer per collective, microseconds beside a DDP step of
// milliseconds (a world of hundreds of ranks would gather them along a tree instead);
// torch.distributed's TORCH_DISTRIBUTED_DEBUG=DETAIL checks the same way, with an all_gather
// of fingerprints on a second (Gloo) group before each collective.
// The NCCL backend does not check yet. It could swap fingerprints through its bootstrap MPI
// group, but NCCL's collectives are queued by the caller's thread (autograd's, under DDP),
// which would then wait for every peer's host before queueing each one, and that cost has to
// be measured on two GPUs before it is paid.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "distributed/process_group.h"

namespace kiln::distributed {

enum class Collective : std::int64_t { AllReduce, Broadcast, AllGather, ReduceScatter, Barrier };

/// "all_reduce", "broadcast", ...: torch.distributed's names.
const char* collective_name(Collective c);

struct CollectiveFingerprint {
  /// 1 for the group's first collective, counted on each rank by the group itself.
  std::int64_t sequence = 0;
  Collective collective = Collective::Barrier;
  DType dtype = DType::Float32;  // barrier: unused
  /// Elements this rank contributes: the tensor's for all_reduce and broadcast, one rank's
  /// share for all_gather (its input) and reduce_scatter (its output). 0 for barrier.
  std::int64_t numel = 0;
  int root = -1;  // broadcast's src, else -1
  std::optional<ReduceOp> reduce_op;  // all_reduce and reduce_scatter

  /// A fingerprint without its sequence number, which the group fills in when it queues the
  /// collective: of(Collective::AllReduce, kFloat32, 1000, ReduceOp::SUM).
  static CollectiveFingerprint of(Collective collective, DType dtype = DType::Float32, std::int64_t numel = 0,
                                  std::optional<ReduceOp> reduce_op = std::nullopt, int root = -1) {
    CollectiveFingerprint f;
    f.collective = collective;
    f.dtype = dtype;
    f.numel = numel;
    f.reduce_op = reduce_op;
    f.root = root;
    return f;
  }

  bool operator==(const CollectiveFingerprint&) const = default;

  /// "all_reduce of 535,818 Float32 elements", "broadcast of 1 Float32 element from rank 0",
  /// "barrier". The sequence number and the reduce op are added when asked (when they are
  /// what differs).
  std::string str(bool with_sequence = false, bool with_reduce_op = false) const;

  /// What travels between ranks: six 64-bit integers.
  using Wire = std::array<std::int64_t, 6>;
  Wire to_wire() const;
  static CollectiveFingerprint from_wire(const Wire& words);
};

/// nullopt when every rank's fingerprint is the same; else the error, the same text on every
/// rank because it compares each rank with rank 0 in rank order:
///   all_reduce #470 does not match across ranks: rank 1 called all_reduce of 1 Float32
///   element, rank 0 all_reduce of 535,818 Float32 elements (every rank must call the same
///   collectives in the same order with the same sizes)
std::optional<std::string> fingerprint_mismatch(const std::vector<CollectiveFingerprint>& by_rank);

}  // namespace kiln::distributed
