// core/cpu/parallel.h — how Kiln uses both cores: OpenMP, decided once (see Note [CPU
// threads]). `parallel_for` splits a range into one contiguous chunk per thread when the work
// is large enough to pay for waking the team.
// Read next: core/cpu/loops.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>

#include <omp.h>

namespace kiln::cpu {

// Note [CPU threads]
// ~~~~~~~~~~~~~~~~~~
// Kiln uses OpenMP for intra-op parallelism, and only OpenMP: Eigen's GEMM already
// parallelises through it when compiled with -fopenmp, so elementwise loops, reductions and
// im2col use the same thread team and never oversubscribe each other. Waking the team costs
// a few microseconds, so work below kGrainSize elements runs inline on the calling thread
// (a 1-element add never touches OpenMP). Nested regions (an op called from inside a
// parallel region, or from a DataLoader worker while another thread runs a GEMM) run
// serially inside. kiln::set_num_threads() sets both OpenMP's and Eigen's thread counts.

inline constexpr std::int64_t kGrainSize = 32768;

/// Calls f(chunk_begin, chunk_end) over [begin, end), in parallel when the range exceeds
/// `grain`. f must not throw (kernels validate before they loop); if it does, the first
/// exception is rethrown on the calling thread after the region ends.
template <class F>
void parallel_for(std::int64_t begin, std::int64_t end, std::int64_t grain, const F& f) {
  const std::int64_t n = end - begin;
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel() || omp_get_max_threads() == 1) {
    f(begin, end);
    return;
  }
  std::exception_ptr error;
#pragma omp parallel
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
