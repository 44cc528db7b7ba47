// distributed/distributed.cpp — the default process group and the free collectives.
#include "distributed/distributed.h"

#include <exception>
#include <mutex>

#include "distributed/process_group_mpi.h"

namespace kiln::distributed {
namespace {

std::mutex g_mutex;
std::shared_ptr<ProcessGroup> g_default;
std::terminate_handler g_previous_terminate = nullptr;

/// An uncaught exception on this rank: its peers learn of it before the process ends, and
/// fail with its message instead of waiting out their timeout.
[[noreturn]] void report_then_terminate() {
  std::string what = "std::terminate was called";
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = std::string("uncaught exception: ") + x.what();
    } catch (...) {
      what = "uncaught exception of an unknown type";
    }
  }
  if (const std::shared_ptr<ProcessGroup> group = g_default) group->report_failure(what);
  if (g_previous_terminate) g_previous_terminate();
  std::abort();
}

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, CollectiveOptions o) {
  if (!o.async_op) work->wait();
  return work;
}

}  // namespace

void init_process_group(const InitOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  KILN_CHECK_VALUE(!g_default, "trying to initialize the default process group twice!");
  KILN_CHECK_VALUE(options.backend == "mpi", "init_process_group: unknown backend '", options.backend,
                   "' (this build has: mpi)");
  g_default = new_mpi_process_group(options.timeout);
  static std::once_flag once;
  std::call_once(once, [] { g_previous_terminate = std::set_terminate(report_then_terminate); });
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_default != nullptr;
}

void destroy_process_group() {
  std::shared_ptr<ProcessGroup> dropped;
  std::lock_guard<std::mutex> lock(g_mutex);
  dropped.swap(g_default);
}

std::shared_ptr<ProcessGroup> default_group_ptr() {
  std::lock_guard<std::mutex> lock(g_mutex);
  KILN_CHECK_VALUE(g_default != nullptr,
                   "Default process group has not been initialized, please make sure to call init_process_group.");
  return g_default;
}

ProcessGroup& default_group() { return *default_group_ptr(); }

int get_rank() { return default_group().rank(); }
int get_world_size() { return default_group().size(); }
int get_local_rank() { return default_group().local_rank(); }

std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op, CollectiveOptions o) {
  return finish(default_group().all_reduce(tensor, op), o);
}
std::shared_ptr<Work> broadcast(Tensor& tensor, int src, CollectiveOptions o) {
  return finish(default_group().broadcast(tensor, src), o);
}
std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input, CollectiveOptions o) {
  return finish(default_group().all_gather(outputs, input), o);
}
std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                     CollectiveOptions o) {
  return finish(default_group().reduce_scatter(output, inputs, op), o);
}
std::shared_ptr<Work> barrier(CollectiveOptions o) { return finish(default_group().barrier(), o); }

}  // namespace kiln::distributed
