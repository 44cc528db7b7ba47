// distributed/backoff.h — how a communication thread polls for a peer without burning a core
// while it waits: spin briefly, then yield, then sleep in growing steps of up to 10 ms.
//   Backoff backoff;
//   while (!done()) backoff.pause();
// Read next: distributed/mpi/process_group_mpi.cpp, which polls MPI requests this way.
//
// Note [Waiting without spinning]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// MPI's blocking calls busy-poll, so a rank whose peer died
// used to hold a core at 100% until its timeout (and, under orte_enable_recovery, after it).
// Polling with MPI_Test and sleeping in between costs latency instead: a peer that arrives
// while this thread sleeps is noticed only when it wakes. The schedule bounds that cost
// against the time already spent waiting. For the first 50 us it spins (a peer that is a few
// microseconds behind, the usual case in a training step, is seen at once); until 2 ms it
// yields, which on an idle core is still a spin but hands the core to the rank's compute
// threads when they need it; after that it sleeps for 1/16 of the time waited so far, between
// 50 us and 10 ms. A late peer therefore costs at most about 6% of the wait it caused, and a
// thread that waits for a dead one wakes a hundred times a second, at some 15 us of CPU each
// (the poll runs MPI's progress engine). A rank waiting for a dead peer thus uses 2-3% of a
// core, most of it its watchdog's (Note [Two threads talk to MPI]). The same schedule polls
// the collective itself once posted: a transfer of under 2 ms is never slowed, and a longer
// one, which Open MPI advances only while it is polled, measured no slower either (16 MiB).
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace kiln::distributed {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds kSpin{50};
  static constexpr std::chrono::microseconds kYield{2000};
  static constexpr std::chrono::microseconds kShortestSleep{50};
  static constexpr std::chrono::microseconds kLongestSleep{10000};

  /// Call between two polls of whatever is awaited.
  void pause() {
    const auto waited = Clock::now() - start_;
    if (waited < kSpin) return;
    if (waited < kYield) {
      std::this_thread::yield();
      return;
    }
    const auto step = std::chrono::duration_cast<std::chrono::microseconds>(waited / 16);
    std::this_thread::sleep_for(std::clamp(step, kShortestSleep, kLongestSleep));
  }

 private:
  Clock::time_point start_ = Clock::now();
};

}  // namespace kiln::distributed
