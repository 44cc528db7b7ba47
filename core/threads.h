// core/threads.h — how many threads Kiln's CPU kernels use (Note [CPU threads] in
// core/cpu/parallel.h). By default every core the process may run on, backing off while
// another process needs them (Note [Sharing the machine] in core/cpu/thread_budget.h); an
// explicit count, from set_num_threads or the environment (KILN_NUM_THREADS, else
// OMP_NUM_THREADS), is used as given.
//   KILN_NUM_THREADS=1 ./train          # one thread, as reproducible as it gets
//   kiln::set_num_threads(4);          // the same from code
#pragma once

namespace kiln {

/// The most threads Kiln's CPU kernels may be given. Above the logical CPUs of the largest
/// machines (two 192-core sockets with SMT have 768), so no real count is refused; far below
/// where Linux stops making threads (each takes two memory maps of vm.max_map_count's default
/// 65,530: 30,000 threads started here, 33,000 did not), which libgomp answers by ending the
/// process, not with an error: set_num_threads(65536) died of SIGSEGV in the first oneDNN
/// kernel (issue 31).
inline constexpr int kMaxNumThreads = 1024;

/// Sets the thread count for CPU kernels (Kiln's, and oneDNN's; Kiln splits Eigen's GEMMs
/// itself), for every thread, and turns the back-off off. 1 <= n <= kMaxNumThreads, else
/// ValueError ("set_num_threads expects a positive integer", PyTorch's, for n < 1).
void set_num_threads(int n);
/// The explicit count, or the most threads Kiln uses when it adapts.
int get_num_threads();
/// Runs this thread's CPU kernels on one thread from now on, whatever the process-wide count
/// (DataLoader workers do, so they do not compete with the training step for its cores).
void use_one_thread_on_this_thread();

}  // namespace kiln
