// tests/profiler/test_stacks.cpp — with_stack: each op's event names the user's functions that
// called it (innermost first, none of Kiln's own frames), key_averages(…, group_by_stack_n)
// splits rows by caller and prints PyTorch's "Source Location" column, the Chrome trace carries
// the stack in its args, and export_stacks writes flamegraph.pl's collapsed stacks whose times
// are the ops' self times. The callers live at global scope, outside namespace kiln, as a
// user's program does (Kiln leaves out the frames of its own namespace).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/call_stack.h"
#include "profiler/profiler.h"
#include "support/test_util.h"

using kiln::Tensor;
using kiln::testing::read_text;
using kiln::profiler::Event;
using kiln::profiler::EventKind;

// noinline and external: each keeps a frame of its own that the dynamic symbol table names.
// The work after the mm keeps it from being a tail call (which would leave no frame).
[[gnu::noinline]] Tensor stack_test_first_caller(const Tensor& a, const Tensor& b) {
  Tensor c = a.mm(b);
  return c.relu();
}
[[gnu::noinline]] Tensor stack_test_second_caller(const Tensor& a, const Tensor& b) {
  Tensor c = a.mm(b);
  return c.relu();
}

namespace {

constexpr const char* kFirst = "stack_test_first_caller(kiln::Tensor const&, kiln::Tensor const&)";
constexpr const char* kSecond = "stack_test_second_caller(kiln::Tensor const&, kiln::Tensor const&)";

}  // namespace

TEST(ProfilerStacks, EachOpNamesItsCallerAndNoKilnFrame) {
  const Tensor a = kiln::randn({256, 256}), b = kiln::randn({256, 256});
  kiln::profiler::Profile prof({.with_stack = true});
  stack_test_first_caller(a, b);
  stack_test_second_caller(a, b);
  Tensor direct = a.mm(b);  // called from the test body itself
  prof.stop();

  std::vector<std::string> mm_callers;
  for (const Event& e : prof.events()) {
    ASSERT_EQ(e.kind, EventKind::Op) << e.name;
    ASSERT_FALSE(e.stack.empty()) << e.name;
    for (const std::string& f : e.stack) EXPECT_FALSE(kiln::is_kiln_frame(f)) << f;
    if (e.name == "aten::mm") mm_callers.push_back(e.stack.front());
  }
  ASSERT_EQ(mm_callers.size(), 3u);
  EXPECT_EQ(mm_callers[0], kFirst);
  EXPECT_EQ(mm_callers[1], kSecond);
  EXPECT_EQ(mm_callers[2], "ProfilerStacks_EachOpNamesItsCallerAndNoKilnFrame_Test::TestBody()");
  // The callers' own caller is the test body: the stack goes on outwards.
  const Event& first_mm = prof.events().front();
  ASSERT_GE(first_mm.stack.size(), 2u);
  EXPECT_EQ(first_mm.stack[1], "ProfilerStacks_EachOpNamesItsCallerAndNoKilnFrame_Test::TestBody()");
}

TEST(ProfilerStacks, OffRecordsNoStackAndGroupingNeedsIt) {
  const Tensor a = kiln::randn({8, 8});
  kiln::profiler::Profile prof;
  stack_test_first_caller(a, a);
  prof.stop();
  ASSERT_FALSE(prof.events().empty());
  for (const Event& e : prof.events()) EXPECT_TRUE(e.stack.empty()) << e.name;
  EXPECT_THROW(prof.key_averages(false, 1), kiln::ValueError);
  EXPECT_THROW(prof.export_stacks("unused.txt"), kiln::ValueError);
}

TEST(ProfilerStacks, GroupByStackSplitsRowsAndPrintsSourceLocation) {
  const Tensor a = kiln::randn({64, 64});
  kiln::profiler::Profile prof({.with_stack = true});
  for (int i = 0; i < 3; ++i) stack_test_first_caller(a, a);
  stack_test_second_caller(a, a);
  prof.stop();

  // Without stacks one row holds every mm; by the top frame, one row per caller.
  std::map<std::string, std::int64_t> counts;
  const kiln::profiler::EventList plain = prof.key_averages();
  for (const auto& row : plain.rows()) counts[row.key] = row.count;
  EXPECT_EQ(counts["aten::mm"], 4);
  std::map<std::string, std::int64_t> by_caller;
  const kiln::profiler::EventList by_top_frame = prof.key_averages(false, 1);
  for (const auto& row : by_top_frame.rows()) {
    ASSERT_EQ(row.stack.size(), 1u) << row.key;
    if (row.key == "aten::mm") by_caller[row.stack.front()] = row.count;
  }
  EXPECT_EQ(by_caller, (std::map<std::string, std::int64_t>{{kFirst, 3}, {kSecond, 1}}));

  // Two frames deep: the caller, then the test body beneath it, on the next line.
  const std::string table = prof.key_averages(false, 2).table({.sort_by = "count"});
  EXPECT_NE(table.find("Source Location"), std::string::npos) << table;
  const auto first = table.find(kFirst);
  ASSERT_NE(first, std::string::npos) << table;
  const auto next_line = table.find('\n', first) + 1;
  EXPECT_NE(table.substr(next_line, table.find('\n', next_line) - next_line)
                .find("SourceLocation_Test::TestBody()"),  // a frame too wide keeps its end
            std::string::npos)
      << table;
  // The plain table has no such column.
  EXPECT_EQ(prof.key_averages().table().find("Source Location"), std::string::npos);
}

TEST(ProfilerStacks, TraceArgsAndCollapsedStacks) {
  const Tensor a = kiln::randn({256, 256});
  kiln::profiler::Profile prof({.with_stack = true});
  for (int i = 0; i < 3; ++i) stack_test_first_caller(a, a);
  prof.stop();
  const auto dir = std::filesystem::temp_directory_path() / "kiln_profiler_stacks";
  std::filesystem::create_directories(dir);
  prof.export_chrome_trace((dir / "trace.json").string());
  prof.export_stacks((dir / "stacks.txt").string(), "self_cpu_time_total");
  EXPECT_THROW(prof.export_stacks((dir / "x.txt").string(), "cpu_time_total"), kiln::ValueError);

  int mm_events = 0;
  const nlohmann::json trace = nlohmann::json::parse(read_text(dir / "trace.json"));
  for (const auto& ev : trace.at("traceEvents")) {
    if (ev.value("name", "") != "aten::mm") continue;
    ++mm_events;
    const auto& stack = ev.at("args").at("Call stack");
    ASSERT_TRUE(stack.is_array());
    EXPECT_EQ(stack.at(0), kFirst);
  }
  EXPECT_EQ(mm_events, 3);

  // Collapsed stacks, as PyTorch writes them: one line per op whose self time is >= 1 us,
  // frames outermost first, the innermost being the op's caller, then the time in us.
  std::int64_t expected_us = 0;
  std::size_t expected_lines = 0;
  for (const Event& e : prof.events()) {
    if (e.self_ns / 1000 > 0) {
      expected_us += e.self_ns / 1000;
      ++expected_lines;
    }
  }
  std::istringstream lines(read_text(dir / "stacks.txt"));
  std::string line;
  std::int64_t total_us = 0;
  std::size_t count = 0;
  while (std::getline(lines, line)) {
    const auto space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    const std::string frames = line.substr(0, space);
    total_us += std::stoll(line.substr(space + 1));
    ++count;
    EXPECT_TRUE(frames.ends_with(std::string(";") + kFirst)) << line;
    EXPECT_NE(frames.find("ProfilerStacks_TraceArgsAndCollapsedStacks_Test::TestBody()"), std::string::npos) << line;
  }
  EXPECT_GE(count, 3u);  // three mm of 256 x 256 take far more than a microsecond each
  EXPECT_EQ(count, expected_lines);
  EXPECT_EQ(total_us, expected_us);
}
