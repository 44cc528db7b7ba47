// core/cpu/parallel.h — how Kiln uses both cores: OpenMP, decided once (see Note [CPU
// threads]). `parallel_for` splits a range into one contiguous chunk per thread when the work
// is large enough to pay for waking the team.
// Read next: core/cpu/loops.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>

#include <omp.h>

#include "core/cpu/thread_budget.h"

namespace kiln::cpu {

// Note [CPU threads]
// ~~~~~~~~~~~~~~~~~~
// Kiln uses OpenMP for intra-op parallelism, and only OpenMP: Eigen's GEMM already
// parallelises through it when compiled with -fopenmp, and so does oneDNN (Debian builds it
// on OpenMP), so elementwise loops, reductions, GEMMs and convolutions use the same thread
// team and never oversubscribe each other. Waking the team costs a few microseconds, so work
// of kGrainSize elements or fewer runs inline on the calling thread (a 1-element add never
// touches OpenMP). Measured for an add on 2 Zen cores: 16,384 floats take 3.5 us on one thread
// and 3.7 on two; 32,768 take 9.5 and 4.7. Nested regions (an op called from inside a
// parallel region, or from a DataLoader worker while another thread runs a GEMM) run
// serially inside. How many threads a region gets is threads_for_region()'s answer (Note
// [Sharing the machine]); kiln::set_num_threads() fixes it for OpenMP, Eigen and oneDNN.

inline constexpr std::int64_t kGrainSize = 16384;

/// Calls f(chunk_begin, chunk_end) over [begin, end), in parallel when the range exceeds
/// `grain`. f must not throw (kernels validate before they loop); if it does, the first
/// exception is rethrown on the calling thread after the region ends.
template <class F>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const F& f) {
  const std::int64_t n = end - begin;
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel()) {
    f(begin, end);
    return;
  }
  const int team = threads_for_region();
  if (team == 1) {
    f(begin, end);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel num_threads(team)
  {
    const std::int64_t threads = omp_get_num_threads();
    const std::int64_t tid = omp_get_thread_num();
    const std::int64_t chunk = (n + threads - 1) / threads;
    const std::int64_t b = begin + tid * chunk;
    const std::int64_t e = std::min(end, b + chunk);
    if (b < e) {
      try {
        f(b, e);
      } catch (...) {
#pragma omp critical
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kiln::cpu
