// tests/distributed/test_fingerprints.cpp — ranks that call different collectives, or the same
// one with another size, dtype or reduce op, get the fingerprint error on every rank at once
// (Note [Collective fingerprints]); nothing is written into their tensors, and the group goes
// on working afterwards. Under `mpirun -np 2` (ctest label `distributed`); the first tests
// check the message and the wire form without communicating.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <regex>

#include "distributed/fingerprint.h"
#include "distributed_setup.h"
#include "support/test_util.h"

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

/// This rank's side of a mismatched collective: it must fail with DistBackendError well
/// before the group's timeout (a minute), because the fingerprints differ, not the clock.
std::string mismatch_error(const std::function<std::shared_ptr<Work>()>& call) {
  const auto start = std::chrono::steady_clock::now();
  std::string message;
  try {
    call()->wait();
  } catch (const DistBackendError& e) {
    message = e.message();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "the mismatch took " << seconds << " s to report: " << message;
  EXPECT_FALSE(message.empty()) << "rank " << get_rank() << ": the mismatched collective did not fail";
  return message;
}

/// Every rank got the error: each says so in a collective that matches, which also shows that
/// the group still works after refusing one.
void expect_on_every_rank(bool failed_here) {
  Tensor flag = full({1}, failed_here ? 1.0 : 0.0);
  all_reduce(flag, ReduceOp::MIN);
  EXPECT_EQ(flag.item<double>(), 1.0) << "a rank did not get the mismatch error";
}

void expect_in(const std::string& message, const std::string& pattern) {
  EXPECT_TRUE(std::regex_search(message, std::regex(pattern))) << "rank " << get_rank() << " got: " << message;
}

TEST(Fingerprints, AnAllReduceOfAnotherSizeFailsOnEveryRankAtOnceAndTouchesNothing) {
  ensure_process_group();
  if (get_world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int rank = get_rank();
  // Issue 31's sizes: rank 1 reduces 1 element, rank 0 a 535,818-element bucket, which MPI
  // used to write past rank 1's tensor. Rank 1's element sits between guards.
  Tensor guarded = full({5}, 7.0);
  Tensor mine = rank == 1 ? guarded.narrow(0, 2, 1) : full({535818}, 1.0);
  const std::string message = mismatch_error([&] { return default_group().all_reduce(mine); });
  expect_in(message, "all_reduce #[0-9]+ does not match across ranks: rank 1 called all_reduce of 1 Float32 element, "
                     "rank 0 all_reduce of 535,818 Float32 elements \\(every rank must call the same collectives");
  EXPECT_EQ(testing::values(guarded), std::vector<double>(5, 7.0));
  if (rank == 0) {
    EXPECT_EQ(mine.sum().item<double>(), 535818.0);
  }
  expect_on_every_rank(!message.empty());
}

TEST(Fingerprints, AnotherCollectiveFailsOnEveryRank) {
  ensure_process_group();
  if (get_world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int rank = get_rank();
  Tensor t = full({10}, static_cast<double>(rank + 1));
  const std::string message = mismatch_error([&] {
    return rank == 1 ? default_group().broadcast(t, 0) : default_group().all_reduce(t);
  });
  expect_in(message, "collective #[0-9]+ does not match across ranks: rank 1 called broadcast of 10 Float32 elements "
                     "from rank 0, rank 0 all_reduce of 10 Float32 elements");
  EXPECT_EQ(testing::values(t), std::vector<double>(10, rank + 1.0));
  expect_on_every_rank(!message.empty());
}

TEST(Fingerprints, AnotherDtypeOrReduceOpFailsOnEveryRank) {
  ensure_process_group();
  if (get_world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int rank = get_rank();
  Tensor t = full({10}, 1.0, TensorOptions().dtype(rank == 1 ? kFloat64 : kFloat32));
  std::string message = mismatch_error([&] { return default_group().all_reduce(t); });
  expect_in(message, "rank 1 called all_reduce of 10 Float64 elements, rank 0 all_reduce of 10 Float32 elements");
  expect_on_every_rank(!message.empty());
  Tensor u = full({10}, 1.0);
  message = mismatch_error([&] { return default_group().all_reduce(u, rank == 1 ? ReduceOp::MAX : ReduceOp::SUM); });
  expect_in(message, "rank 1 called all_reduce MAX of 10 Float32 elements, rank 0 all_reduce SUM of 10 Float32");
  expect_on_every_rank(!message.empty());
}

}  // namespace
}  // namespace kiln::distributed
