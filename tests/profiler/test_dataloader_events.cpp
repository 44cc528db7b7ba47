// tests/profiler/test_dataloader_events.cpp — a profiled loop over a DataLoader with two
// workers: every batch a worker builds is one "DataLoader worker: batch" event on that worker's
// own lane (a thread id other than the loop's), and every batch the loop takes is one
// "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__" event on the loop's thread,
// as in PyTorch's traces; the Chrome trace names each lane.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <variant>

#include <nlohmann/json.hpp>

#include "profiler/profiler.h"
#include "support/test_util.h"

namespace kiln {
namespace {

using profiler::Event;

std::int64_t int_arg(const Event& e, const std::string& key) {
  for (const profiler::SpanArg& a : e.args) {
    if (a.key == key) return std::get<std::int64_t>(a.value);
  }
  ADD_FAILURE() << e.name << " has no arg " << key;
  return -1;
}

TEST(ProfilerDataLoader, WorkerBatchesOnTheirOwnLanes) {
  data::DataLoader loader(testing::numbers(16), {.batch_size = 2, .num_workers = 2});
  profiler::Profile prof;
  double total = 0;
  for (const data::Example& batch : loader) total += batch.data.sum().item<double>();
  prof.stop();
  EXPECT_EQ(total, 120.0);  // 0 + 1 + ... + 15: the profiled loop is the plain one

  const std::int64_t loop_tid = profiler::current_thread_id();
  std::multiset<std::int64_t> batches;
  std::set<std::int64_t> worker_lanes;
  int nexts = 0;
  for (const Event& e : prof.events()) {
    if (e.name == "DataLoader worker: batch") {
      EXPECT_FALSE(e.on_profiled_thread);
      EXPECT_NE(e.tid, loop_tid);
      EXPECT_EQ(e.parent, -1);
      EXPECT_GT(e.duration_ns(), 0);
      EXPECT_EQ(int_arg(e, "Samples"), 2);
      const std::int64_t worker = int_arg(e, "Worker");
      EXPECT_TRUE(worker == 0 || worker == 1) << worker;
      batches.insert(int_arg(e, "Batch"));
      worker_lanes.insert(e.tid);
    } else if (e.name == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__") {
      EXPECT_TRUE(e.on_profiled_thread);
      EXPECT_EQ(e.tid, loop_tid);
      ++nexts;
    }
  }
  EXPECT_EQ(batches, (std::multiset<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));  // each batch once
  EXPECT_GE(worker_lanes.size(), 1u);
  EXPECT_LE(worker_lanes.size(), 2u);
  EXPECT_EQ(nexts, 8);

  // In the trace: the worker events sit on their lanes, each lane named.
  const auto path = std::filesystem::temp_directory_path() / "kiln_profiler_dataloader.json";
  prof.export_chrome_trace(path.string());
  std::set<std::int64_t> named_lanes, worker_event_lanes;
  const nlohmann::json trace = nlohmann::json::parse(testing::read_text(path));
  for (const auto& ev : trace.at("traceEvents")) {
    if (ev.at("ph") == "M" && ev.at("name") == "thread_name") named_lanes.insert(ev.at("tid").get<std::int64_t>());
    if (ev.at("ph") == "X" && ev.at("name") == "DataLoader worker: batch") {
      worker_event_lanes.insert(ev.at("tid").get<std::int64_t>());
      EXPECT_EQ(ev.at("cat"), "user_annotation");
      EXPECT_TRUE(ev.at("args").contains("Batch"));
    }
  }
  EXPECT_EQ(worker_event_lanes, worker_lanes);
  for (std::int64_t lane : worker_lanes) EXPECT_TRUE(named_lanes.contains(lane)) << lane;
  EXPECT_TRUE(named_lanes.contains(loop_tid));
}

// Without workers the loop builds each batch itself: only the __next__ spans, on its thread.
TEST(ProfilerDataLoader, WithoutWorkersTheLoopBuildsItsBatches) {
  data::DataLoader loader(testing::numbers(6), {.batch_size = 3});
  profiler::Profile prof;
  for (const data::Example& batch : loader) EXPECT_EQ(batch.data.size(0), 3);
  prof.stop();
  int nexts = 0;
  for (const Event& e : prof.events()) {
    EXPECT_TRUE(e.on_profiled_thread) << e.name;
    if (e.name == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__") ++nexts;
  }
  EXPECT_EQ(nexts, 2);
}

}  // namespace
}  // namespace kiln
