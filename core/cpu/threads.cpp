// core/cpu/threads.cpp — one knob for OpenMP, Eigen and oneDNN (Note [CPU threads]), and the
// back-off that shares the machine (Note [Sharing the machine] in thread_budget.h).
#include "core/threads.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/cpu/thread_budget.h"
#include "core/error.h"
#include "core/warning.h"

namespace kiln {

namespace cpu {

namespace {

/// 0 while the count adapts; otherwise the count set by set_num_threads or the environment.
std::atomic<int> g_explicit_threads{-1};  // -1: not read from the environment yet

int explicit_threads() {
  int n = g_explicit_threads.load(std::memory_order_relaxed);
  if (n >= 0) return n;
  n = 0;
  if (const char* kiln = std::getenv("KILN_NUM_THREADS")) {
    char* end = nullptr;
    const long v = std::strtol(kiln, &end, 10);
    if (end != kiln && *end == '\0' && v > 0 && v <= kMaxNumThreads) {
      n = static_cast<int>(v);
    } else {
      warn_once("KILN_NUM_THREADS", std::string("KILN_NUM_THREADS must be an integer from 1 to ") +
                                        std::to_string(kMaxNumThreads) + ", got '" + kiln + "'; ignoring it");
    }
  }
  // OMP_NUM_THREADS is a count the user chose too: OpenMP already applies it. Kiln's own
  // regions and oneDNN's (through omp_set_num_threads) keep within kMaxNumThreads all the same.
  if (n == 0 && std::getenv("OMP_NUM_THREADS") != nullptr) {
    n = omp_get_max_threads();
    if (n > kMaxNumThreads) {
      warn_once("OMP_NUM_THREADS", "OMP_NUM_THREADS=" + std::to_string(n) + " is more than Kiln's kernels use; they use " +
                                       std::to_string(kMaxNumThreads));
      n = kMaxNumThreads;
    }
  }
  int expected = -1;
  g_explicit_threads.compare_exchange_strong(expected, n);
  return g_explicit_threads.load(std::memory_order_relaxed);
}

/// Nanoseconds this thread has spent runnable but waiting for a core, or nothing where the
/// kernel does not report it.
std::optional<long long> waiting_nanoseconds() {
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[96];
  const ssize_t got = ::read(fd, buffer, sizeof(buffer) - 1);
  ::close(fd);
  if (got <= 0) return std::nullopt;
  buffer[got] = '\0';
  long long running = 0, waiting = 0;
  if (std::sscanf(buffer, "%lld %lld", &running, &waiting) != 2) return std::nullopt;
  return waiting;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// What each thread knows about its own count (OpenMP's count is per thread).
struct ThreadState {
  int applied = 0;        // the count last given to omp_set_num_threads, 0 before the first
  bool serial = false;    // use_one_thread_on_this_thread()
  std::optional<ThreadBudget> budget;
  double last_sample = 0;
  long long last_waiting = 0;
  bool can_sample = true;
};

ThreadState& this_thread() {
  thread_local ThreadState state;
  return state;
}

int apply(ThreadState& s, int n) {
  if (s.applied != n) {
    omp_set_num_threads(n);
    s.applied = n;
  }
  return n;
}

}  // namespace

int ThreadBudget::update(double waiting_fraction, double now) {
  if (waiting_fraction > kContendedFraction) {
    if (threads_ > 1) {
      --threads_;
      last_change_ = now;
    }
  } else if (threads_ < max_ && now - last_change_ >= kProbeSeconds) {
    ++threads_;  // a probe: the next sample keeps it or takes it back
    last_change_ = now;
  }
  return threads_;
}

int threads_for_region() {
  if (omp_in_parallel()) return 1;
  ThreadState& s = this_thread();
  if (s.serial) return 1;
  if (const int n = explicit_threads(); n > 0) return apply(s, n);
  if (!s.budget) {
    s.budget.emplace(omp_get_max_threads());
    s.applied = s.budget->max_threads();
    s.last_sample = seconds_now();
    const auto waiting = waiting_nanoseconds();
    s.can_sample = waiting.has_value() && s.budget->max_threads() > 1;
    s.last_waiting = waiting.value_or(0);
  }
  if (!s.can_sample) return s.budget->threads();
  const double now = seconds_now();
  if (now - s.last_sample >= ThreadBudget::kSampleSeconds) {
    const long long waiting = waiting_nanoseconds().value_or(s.last_waiting);
    const double fraction = static_cast<double>(waiting - s.last_waiting) * 1e-9 / (now - s.last_sample);
    s.last_sample = now;
    s.last_waiting = waiting;
    apply(s, s.budget->update(fraction, now));
  }
  return s.budget->threads();
}

void set_explicit_threads(int n) { g_explicit_threads.store(n); }

}  // namespace cpu

void set_num_threads(int n) {
  KILN_CHECK_VALUE(n > 0, "set_num_threads expects a positive integer, got ", n);
  KILN_CHECK_VALUE(n <= kMaxNumThreads, "set_num_threads expects at most ", kMaxNumThreads,
                   " threads (kiln::kMaxNumThreads), got ", n);
  cpu::set_explicit_threads(n);
  omp_set_num_threads(n);
  cpu::this_thread().applied = n;
}

int get_num_threads() {
  if (const int n = cpu::explicit_threads(); n > 0) return n;
  cpu::ThreadState& s = cpu::this_thread();
  return s.budget ? s.budget->max_threads() : omp_get_max_threads();
}

void use_one_thread_on_this_thread() {
  cpu::ThreadState& s = cpu::this_thread();
  s.serial = true;
  omp_set_num_threads(1);
  s.applied = 1;
}

}  // namespace kiln
