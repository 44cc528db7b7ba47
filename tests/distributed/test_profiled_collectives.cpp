// tests/distributed/test_profiled_collectives.cpp — under a profiler, each collective of the MPI
// backend is one event named as PyTorch's traces name it ("c10d::allreduce_"), on the thread
// that called it, with its element counts, bytes, dtype and group size in the args (Note
// [Collectives in a profile]). Runs on every rank of `mpirun -np 2` and of the one-rank run.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <variant>

#include "core/creation.h"
#include "distributed/distributed.h"
#include "distributed_setup.h"
#include "profiler/profiler.h"

namespace kiln::distributed {
namespace {

using profiler::Event;
using profiler::EventKind;

/// The span args of `e` by key.
std::map<std::string, std::variant<std::int64_t, std::string>> args_of(const Event& e) {
  std::map<std::string, std::variant<std::int64_t, std::string>> out;
  for (const profiler::SpanArg& a : e.args) out[a.key] = a.value;
  return out;
}

TEST(ProfiledCollectives, EachCollectiveIsAnEventWithItsSizes) {
  ensure_process_group();
  const std::int64_t world = get_world_size();
  Tensor sum = full({1000}, 1.0);  // Float32
  Tensor from_root = zeros({10}, TensorOptions().dtype(kFloat64));
  std::vector<Tensor> gathered(static_cast<std::size_t>(world), zeros({5}));
  profiler::Profile prof;
  all_reduce(sum);
  broadcast(from_root, 0);
  all_gather(gathered, ones({5}));
  barrier();
  prof.stop();
  EXPECT_EQ(sum[0].item<double>(), static_cast<double>(world));  // the profiled run is the plain one

  std::vector<const Event*> collectives;
  for (const Event& e : prof.events()) {
    if (e.kind == EventKind::Collective) collectives.push_back(&e);
  }
  ASSERT_EQ(collectives.size(), 4u);
  const std::vector<std::string> names = {"c10d::allreduce_", "c10d::broadcast_", "c10d::allgather_", "c10d::barrier"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    const Event& e = *collectives[i];
    EXPECT_EQ(e.name, names[i]);
    EXPECT_TRUE(e.on_profiled_thread);  // called on the recording thread: nested among its ops
    EXPECT_EQ(e.tid, profiler::current_thread_id());
    auto args = args_of(e);
    EXPECT_EQ(std::get<std::int64_t>(args.at("Group size")), world);
    EXPECT_EQ(std::get<std::int64_t>(args.at("Rank")), get_rank());
    EXPECT_EQ(std::get<std::string>(args.at("Backend")), "mpi");
  }
  auto all_reduce_args = args_of(*collectives[0]);
  EXPECT_EQ(std::get<std::string>(all_reduce_args.at("Collective name")), "allreduce");
  EXPECT_EQ(std::get<std::string>(all_reduce_args.at("dtype")), "Float");
  EXPECT_EQ(std::get<std::int64_t>(all_reduce_args.at("In msg nelems")), 1000);
  EXPECT_EQ(std::get<std::int64_t>(all_reduce_args.at("Out msg nelems")), 1000);
  EXPECT_EQ(std::get<std::int64_t>(all_reduce_args.at("In msg bytes")), 4000);
  auto broadcast_args = args_of(*collectives[1]);
  EXPECT_EQ(std::get<std::string>(broadcast_args.at("dtype")), "Double");
  EXPECT_EQ(std::get<std::int64_t>(broadcast_args.at("In msg bytes")), 80);
  auto gather_args = args_of(*collectives[2]);
  EXPECT_EQ(std::get<std::int64_t>(gather_args.at("In msg nelems")), 5);
  EXPECT_EQ(std::get<std::int64_t>(gather_args.at("Out msg nelems")), 5 * world);
  EXPECT_EQ(std::get<std::int64_t>(args_of(*collectives[3]).at("In msg bytes")), 0);
}

// A collective on a thread that records no ops (a rank's helper thread) still lands in the
// profile, on that thread's own lane.
TEST(ProfiledCollectives, AnotherThreadsCollectiveGetsItsLane) {
  ensure_process_group();
  profiler::Profile prof;
  std::int64_t helper_tid = 0;
  std::thread helper([&] {
    helper_tid = profiler::current_thread_id();
    Tensor t = ones({3});
    all_reduce(t);
  });
  helper.join();
  prof.stop();
  int seen = 0;
  for (const Event& e : prof.events()) {
    if (e.name != "c10d::allreduce_") continue;
    ++seen;
    EXPECT_FALSE(e.on_profiled_thread);
    EXPECT_EQ(e.tid, helper_tid);
    EXPECT_NE(e.tid, profiler::current_thread_id());
    EXPECT_EQ(std::get<std::int64_t>(args_of(e).at("In msg bytes")), 12);
  }
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace kiln::distributed
