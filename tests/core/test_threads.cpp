// tests/core/test_threads.cpp — the thread count: the back-off policy of Note [Sharing the
// machine] fed measured waiting fractions, an explicit count that is used as given, and
// threads that run their kernels alone (DataLoader workers).
// Read next: core/cpu/thread_budget.h.
#include <omp.h>

#include <atomic>
#include <thread>

#include "core/cpu/parallel.h"
#include "support/test_util.h"

using namespace kiln;
using cpu::ThreadBudget;

namespace {

/// How many threads a parallel_for over a range big enough to fork actually used.
int threads_a_region_uses() {
  std::atomic<int> most{0};
  cpu::parallel_for(0, 1 << 20, 1, [&](std::int64_t, std::int64_t) {
    int seen = omp_get_num_threads();
    int previous = most.load();
    while (seen > previous && !most.compare_exchange_weak(previous, seen)) {
    }
  });
  return most.load();
}

}  // namespace

TEST(ThreadBudget, AQuietMachineKeepsEveryThread) {
  ThreadBudget budget(2);
  for (int i = 1; i <= 50; ++i) EXPECT_EQ(budget.update(0.01, 0.1 * i), 2);
}

TEST(ThreadBudget, WaitingForACoreBacksOffOneThreadAtATime) {
  ThreadBudget budget(4);
  EXPECT_EQ(budget.update(0.3, 0.1), 3);
  EXPECT_EQ(budget.update(0.3, 0.2), 2);
  EXPECT_EQ(budget.update(0.3, 0.3), 1);
  EXPECT_EQ(budget.update(0.5, 0.4), 1);  // never below one
}

TEST(ThreadBudget, ProbesUpwardAfterAQuietIntervalAndKeepsWhatDoesNotWait) {
  ThreadBudget budget(2);
  EXPECT_EQ(budget.update(0.3, 0.1), 1);
  // While the neighbour runs, one thread waits for nothing; no probe before kProbeSeconds.
  EXPECT_EQ(budget.update(0.0, 0.1 + ThreadBudget::kProbeSeconds / 2), 1);
  // After it: one more thread, on trial.
  EXPECT_EQ(budget.update(0.0, 0.1 + ThreadBudget::kProbeSeconds), 2);
  // The neighbour is still there: the trial waits, and is taken back.
  EXPECT_EQ(budget.update(0.3, 0.2 + ThreadBudget::kProbeSeconds), 1);
  // Later it has gone: the next probe stays.
  EXPECT_EQ(budget.update(0.0, 0.2 + 2 * ThreadBudget::kProbeSeconds), 2);
  EXPECT_EQ(budget.update(0.0, 0.3 + 2 * ThreadBudget::kProbeSeconds), 2);
}

TEST(Threads, AnExplicitCountIsUsedAsGiven) {
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  EXPECT_EQ(threads_a_region_uses(), 1);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  if (omp_get_num_procs() >= 2) {
    EXPECT_EQ(threads_a_region_uses(), 2);
  }
  EXPECT_ERROR(set_num_threads(0), "set_num_threads expects a positive integer, got 0");
}

// set_num_threads(65536) used to be accepted and then crash libgomp (SIGSEGV) in the first
// oneDNN kernel: Linux runs out of memory maps for threads long before 65,536 (issue 31).
TEST(Threads, ACountBeyondTheBoundIsRefusedAndTheOldOneKept) {
  set_num_threads(2);
  EXPECT_ERROR(set_num_threads(65536), "set_num_threads expects at most 1024 threads (kiln::kMaxNumThreads), got 65536");
  EXPECT_ERROR(set_num_threads(-1), "set_num_threads expects a positive integer, got -1");
  EXPECT_EQ(get_num_threads(), 2);
  set_num_threads(kMaxNumThreads);  // the bound itself is a count like any other
  EXPECT_EQ(get_num_threads(), kMaxNumThreads);
  set_num_threads(2);
}

TEST(Threads, AThreadThatRunsAloneForksNoTeam) {
  int used = 0;
  std::thread worker([&] {
    use_one_thread_on_this_thread();
    used = threads_a_region_uses();
  });
  worker.join();
  EXPECT_EQ(used, 1);
}
