// tests/distributed/failures/failing_rank.cpp — a two-rank program whose rank 1 fails in the
// middle of its work, for the ctest cases that check that rank 0 gets an error naming rank 1
// within the timeout instead of hanging (Note [Nothing hangs forever]):
//   failing_rank raise   rank 1 throws and nobody catches it
//   failing_rank kill    rank 1 is killed (SIGKILL): no goodbye, only silence
//   failing_rank skip    rank 1 lives but never calls the collective
// Rank 0 prints "rank 0 failed after S s (P% of a core): <message>", P being the CPU time
// the whole process used while it waited (Note [Waiting without spinning]). ctest matches
// that line.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/creation.h"
#include "distributed/distributed.h"

int main(int argc, char** argv) {
  using namespace kiln;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "raise" && mode != "kill" && mode != "skip") {
    std::fprintf(stderr, "usage: failing_rank raise|kill|skip\n");
    return 2;
  }
  const auto timeout = std::chrono::milliseconds(3000);
  distributed::init_process_group({.timeout = timeout});
  const int rank = distributed::get_rank();
  Tensor t = ones({1000});
  distributed::all_reduce(t);  // everyone is up
  if (rank == 1) {
    if (mode == "raise") throw std::runtime_error("injected failure in step 2");
    if (mode == "kill") std::raise(SIGKILL);
    // skip: alive (the communication thread answers pings), but away from the collective.
    std::this_thread::sleep_for(timeout + std::chrono::seconds(4));
    std::_Exit(0);
  }
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();  // the process's CPU time, every thread's
  try {
    distributed::all_reduce(t);
  } catch (const distributed::DistBackendError& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    const double percent = 100.0 * cpu / std::max(seconds, 1e-3);
    std::printf("rank %d failed after %.1f s (%.0f%% of a core): %s\n", rank, seconds, percent, e.message().c_str());
    std::fflush(stdout);
    std::_Exit(1);  // the collective can never finish: do not finalise MPI under it
  }
  std::printf("rank %d: the collective finished without rank 1\n", rank);
  return 3;
}
