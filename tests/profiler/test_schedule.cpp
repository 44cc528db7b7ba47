// tests/profiler/test_schedule.cpp — torch.profiler.schedule in Kiln: the actions step by step
// as PyTorch's schedule_fn gives them, and a Profile driven by step(): only the recorded steps'
// ops in each trace, each step a ProfilerStep#N span, on_trace_ready once per cycle.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profiler/profiled_models.h"
#include "profiler/profiler.h"

namespace kiln {
namespace {

using profiler::EventKind;
using profiler::ProfilerAction;
using profiler::Schedule;

std::vector<std::string> step_spans(const profiler::Profile& prof) {
  std::vector<std::string> names;
  for (const profiler::Event& e : prof.events()) {
    if (e.kind == EventKind::Region && e.name.rfind("ProfilerStep#", 0) == 0) names.push_back(e.name);
  }
  return names;
}

int count_named(const profiler::Profile& prof, const std::string& name) {
  int n = 0;
  for (const profiler::Event& e : prof.events()) n += e.name == name ? 1 : 0;
  return n;
}

TEST(ProfilerSchedule, ActionsFollowPyTorchsScheduleFn) {
  using enum ProfilerAction;
  const Schedule s{.skip_first = 1, .wait = 1, .warmup = 1, .active = 2, .repeat = 2};
  const std::vector<ProfilerAction> expected = {None, None, Warmup, Record, RecordAndSave, None,
                                                Warmup, Record, RecordAndSave, None, None, None};
  for (std::size_t step = 0; step < expected.size(); ++step) {
    EXPECT_EQ(s(static_cast<std::int64_t>(step)), expected[step]) << "step " << step;
  }
  // repeat = 0 cycles for ever; active = 1 saves every step of it.
  const Schedule every_third{.wait = 2, .active = 1};
  EXPECT_EQ(every_third(2), RecordAndSave);
  EXPECT_EQ(every_third(3000), None);
  EXPECT_EQ(every_third(3002), RecordAndSave);
}

TEST(ProfilerSchedule, InvalidArgumentsAreRefused) {
  EXPECT_THROW(profiler::Profile({.schedule = Schedule{.active = 0}}), ValueError);
  try {
    Schedule{.wait = -1}.validate();
    FAIL() << "a negative wait was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Invalid profiler schedule arguments"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("wait=-1"), std::string::npos) << e.what();
  }
  // The refused Profile did not take the process's one profiling slot.
  EXPECT_NO_THROW(profiler::Profile prof);
}

// Two cycles of wait 1, warm-up 1, active 2 over ten steps: each trace holds its two active
// steps, named by the profile's step number, and nothing of the steps around them.
TEST(ProfilerSchedule, EachCycleHandsItsActiveStepsToOnTraceReady) {
  manual_seed(0);
  profiled::TinyMlp model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01));
  const Tensor x = randn({8, 64}), y = randint(0, 10, {8});
  std::vector<std::vector<std::string>> traces;
  std::vector<int> optimizer_steps, relus;
  {
    profiler::Profile prof({.schedule = Schedule{.wait = 1, .warmup = 1, .active = 2, .repeat = 2},
                            .on_trace_ready = [&](profiler::Profile& p) {
                              traces.push_back(step_spans(p));
                              optimizer_steps.push_back(count_named(p, "optimizer.step"));
                              relus.push_back(count_named(p, "aten::relu"));
                            }});
    for (int k = 0; k < 10; ++k) {
      EXPECT_EQ(prof.is_recording(), k % 4 != 0 && k < 8) << "step " << k;
      profiled::train_step(model, sgd, x, y);
      prof.step();
    }
  }
  ASSERT_EQ(traces.size(), 2u);
  EXPECT_EQ(traces[0], (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3"}));
  EXPECT_EQ(traces[1], (std::vector<std::string>{"ProfilerStep#6", "ProfilerStep#7"}));
  EXPECT_EQ(optimizer_steps, (std::vector<int>{2, 2}));  // the warm-up step's are thrown away
  EXPECT_EQ(relus, (std::vector<int>{2, 2}));            // one relu a step
}

// A run that ends inside the active steps still hands over what it recorded; one that ends in
// its warm-up hands over nothing.
TEST(ProfilerSchedule, StopInsideTheActiveStepsReportsThem) {
  manual_seed(0);
  profiled::TinyMlp model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01));
  const Tensor x = randn({8, 64}), y = randint(0, 10, {8});
  for (int steps : {1, 4}) {
    std::vector<std::string> spans;
    int ready = 0;
    profiler::Profile prof({.schedule = Schedule{.wait = 1, .warmup = 1, .active = 3},
                            .on_trace_ready = [&](profiler::Profile& p) {
                              ++ready;
                              spans = step_spans(p);
                            }});
    for (int k = 0; k < steps; ++k) {
      profiled::train_step(model, sgd, x, y);
      prof.step();
    }
    prof.stop();
    if (steps == 1) {  // stopped in step 1, the warm-up
      EXPECT_EQ(ready, 0);
    } else {
      EXPECT_EQ(ready, 1);
      // Step 4 began when step() was last called; stop() ends it with nothing in it.
      EXPECT_EQ(spans, (std::vector<std::string>{"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}));
    }
  }
}

// Without a schedule a Profile records from its start to stop(), marks no steps (as PyTorch's
// record_steps is off then), and still calls on_trace_ready once at stop().
TEST(ProfilerSchedule, WithoutAScheduleEverythingIsOneTrace) {
  manual_seed(0);
  profiled::TinyMlp model;
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.01));
  const Tensor x = randn({8, 64}), y = randint(0, 10, {8});
  int ready = 0;
  profiler::Profile prof({.on_trace_ready = [&](profiler::Profile&) { ++ready; }});
  for (int k = 0; k < 3; ++k) {
    profiled::train_step(model, sgd, x, y);
    prof.step();
  }
  EXPECT_EQ(prof.step_num(), 3);
  prof.stop();
  EXPECT_EQ(ready, 1);
  EXPECT_TRUE(step_spans(prof).empty());
  EXPECT_EQ(count_named(prof, "optimizer.step"), 3);
  EXPECT_THROW(prof.step(), Error);  // "step() after stop()"
}

}  // namespace
}  // namespace kiln
