// core/cpu/thread_budget.h — how many threads the next parallel region uses: the count the
// user set, or, by default, every core Kiln may run on, backing off while another process
// needs them (Note [Sharing the machine]). Kiln's parallel_for and the oneDNN kernels ask
// here before they fork.
// Read next: core/cpu/parallel.h.
#pragma once

namespace kiln::cpu {

// Note [Sharing the machine]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// OpenMP's workers spin for a while after each parallel region before they sleep (libgomp's
// default: 300,000 spins), so that the next region starts without a wake-up. On a machine of
// its own that is free speed; beside another busy process it takes the core that process
// needs, the scheduler shares the cores three ways, and every region waits for its slowest
// thread. Measured on 2 cores with one busy neighbour (train_mlp, one epoch): 2.82 s idle,
// 4.95 s on one thread, 7.90 s on two threads sharing. Passive waiting (OMP_WAIT_POLICY=passive)
// fixes it (5.18 s) but can only be set in the environment before the program starts, and
// costs ~5 % on an idle machine. So Kiln keeps OpenMP's defaults and instead watches the
// scheduler: every kSampleSeconds the calling thread reads how long it has been runnable but
// waiting for a core (/proc/thread-self/schedstat). Waiting more than kContendedFraction of the
// time means more runnable threads than cores: one thread fewer. Every kProbeSeconds below the
// maximum it tries one more, and keeps it if nothing waits.
//
// An explicit count (kiln::set_num_threads, KILN_NUM_THREADS or OMP_NUM_THREADS) is used as
// given, never adapted: oneDNN's results depend on the thread count in their last bits, and
// a run that must be reproducible bit for bit should fix it. Kiln's own sums do not depend
// on it (Note [How Kiln sums]).

/// The back-off policy on its own, fed measurements, so that it can be tested without a
/// busy machine.
class ThreadBudget {
 public:
  static constexpr double kSampleSeconds = 0.1;
  static constexpr double kContendedFraction = 0.1;
  static constexpr double kProbeSeconds = 2.0;

  explicit ThreadBudget(int max_threads) : max_(max_threads), threads_(max_threads) {}

  /// Takes one sample: the fraction of the last window the thread spent waiting for a core,
  /// at time `now` (seconds); returns the thread count to use from now on.
  int update(double waiting_fraction, double now);
  int threads() const { return threads_; }
  int max_threads() const { return max_; }

 private:
  int max_, threads_;
  double last_change_ = 0;
};

/// The thread count for a parallel region about to start on this thread (1 inside another
/// region). May sample the scheduler and change OpenMP's count for this thread.
int threads_for_region();

/// Makes `n` threads the explicit count for every thread (kiln::set_num_threads).
void set_explicit_threads(int n);

}  // namespace kiln::cpu
