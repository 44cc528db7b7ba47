// core/threads.h — how many threads Kiln's CPU kernels use (Note [CPU threads] in
// core/cpu/parallel.h). By default every core the process may run on, backing off while
// another process needs them (Note [Sharing the machine] in core/cpu/thread_budget.h); an
// explicit count, from set_num_threads or the environment (KILN_NUM_THREADS, else
// OMP_NUM_THREADS), is used as given.
//   KILN_NUM_THREADS=1 ./train          # one thread, as reproducible as it gets
//   kiln::set_num_threads(4);          // the same from code
#pragma once

namespace kiln {

/// Sets the thread count for CPU kernels (Kiln's, and oneDNN's; Kiln splits Eigen's GEMMs
/// itself), for every thread, and turns the back-off off.
void set_num_threads(int n);
/// The explicit count, or the most threads Kiln uses when it adapts.
int get_num_threads();
/// Runs this thread's CPU kernels on one thread from now on, whatever the process-wide count
/// (DataLoader workers do, so they do not compete with the training step for its cores).
void use_one_thread_on_this_thread();

}  // namespace kiln
