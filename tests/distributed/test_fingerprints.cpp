// tests/distributed/test_fingerprints.cpp — the fingerprint a rank sends before each collective
// (Note [Collective fingerprints]): its message names both sides in the words of issue 31, and
// its wire form keeps every field. Part of the `mpirun -np 2` suite (ctest label
// `distributed`), though these checks do not communicate.
#include <gtest/gtest.h>

#include "distributed/fingerprint.h"

namespace kiln::distributed {
namespace {

CollectiveFingerprint numbered(CollectiveFingerprint f, std::int64_t sequence) {
  f.sequence = sequence;
  return f;
}

TEST(Fingerprints, TheMismatchNamesBothSidesInIssue31sWords) {
  const auto big = numbered(CollectiveFingerprint::of(Collective::AllReduce, kFloat32, 535818, ReduceOp::AVG), 470);
  const auto one = numbered(CollectiveFingerprint::of(Collective::AllReduce, kFloat32, 1, ReduceOp::AVG), 470);
  EXPECT_EQ(fingerprint_mismatch({big, big, big}), std::nullopt);
  EXPECT_EQ(fingerprint_mismatch({big, one}).value(),
            "all_reduce #470 does not match across ranks: rank 1 called all_reduce of 1 Float32 element, rank 0 "
            "all_reduce of 535,818 Float32 elements (every rank must call the same collectives in the same order "
            "with the same sizes)");
}

TEST(Fingerprints, EachSideSaysWhatTellsThemApart) {
  const auto reduce = numbered(CollectiveFingerprint::of(Collective::AllReduce, kFloat32, 10, ReduceOp::SUM), 5);
  const auto cast = numbered(CollectiveFingerprint::of(Collective::Broadcast, kFloat32, 10, std::nullopt, 0), 5);
  const auto max = numbered(CollectiveFingerprint::of(Collective::AllReduce, kFloat32, 10, ReduceOp::MAX), 5);
  const auto doubles = numbered(CollectiveFingerprint::of(Collective::AllReduce, kFloat64, 10, ReduceOp::SUM), 5);
  const auto later = numbered(CollectiveFingerprint::of(Collective::AllReduce, kFloat32, 10, ReduceOp::SUM), 6);
  const auto barrier = numbered(CollectiveFingerprint::of(Collective::Barrier), 5);
  const std::string tail = " (every rank must call the same collectives in the same order with the same sizes)";
  EXPECT_EQ(fingerprint_mismatch({reduce, cast}).value(),
            "collective #5 does not match across ranks: rank 1 called broadcast of 10 Float32 elements from rank 0, "
            "rank 0 all_reduce of 10 Float32 elements" + tail);
  EXPECT_EQ(fingerprint_mismatch({reduce, max}).value(),
            "all_reduce #5 does not match across ranks: rank 1 called all_reduce MAX of 10 Float32 elements, rank 0 "
            "all_reduce SUM of 10 Float32 elements" + tail);
  EXPECT_EQ(fingerprint_mismatch({reduce, reduce, doubles}).value(),
            "all_reduce #5 does not match across ranks: rank 2 called all_reduce of 10 Float64 elements, rank 0 "
            "all_reduce of 10 Float32 elements" + tail);
  EXPECT_EQ(fingerprint_mismatch({reduce, later}).value(),
            "all_reduce #5 does not match across ranks: rank 1 called all_reduce #6 of 10 Float32 elements, rank 0 "
            "all_reduce #5 of 10 Float32 elements" + tail);
  EXPECT_EQ(fingerprint_mismatch({barrier, reduce}).value(),
            "collective #5 does not match across ranks: rank 1 called all_reduce of 10 Float32 elements, rank 0 "
            "barrier" + tail);
}

TEST(Fingerprints, TheWireFormKeepsEveryField) {
  const auto f = numbered(CollectiveFingerprint::of(Collective::ReduceScatter, kBFloat16, 1LL << 40, ReduceOp::MIN), 9);
  EXPECT_EQ(CollectiveFingerprint::from_wire(f.to_wire()), f);
  const auto g = numbered(CollectiveFingerprint::of(Collective::Broadcast, kInt8, 3, std::nullopt, 1), 1);
  EXPECT_EQ(CollectiveFingerprint::from_wire(g.to_wire()), g);
  EXPECT_NE(CollectiveFingerprint::from_wire(g.to_wire()), f);
}

}  // namespace
}  // namespace kiln::distributed
