// core/threads.h — how many threads Kiln's CPU kernels use (see Note [CPU threads] in
// core/cpu/parallel.h). Defaults to OpenMP's default (all cores, or OMP_NUM_THREADS).
#pragma once

namespace kiln {

/// Sets the thread count for CPU kernels, including Eigen's GEMM.
void set_num_threads(int n);
int get_num_threads();

}  // namespace kiln
