// distributed/distributed.cpp — the default process group and the free collectives.
#include "distributed/distributed.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "core/creation.h"
#include "distributed/process_group_mpi.h"
#include "distributed/process_group_nccl.h"

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

std::string built_backends() {
  std::string names;
  if (mpi_is_available()) names += "mpi";
  if (nccl_is_available()) names += names.empty() ? "nccl" : ", nccl";
  return names.empty() ? "none" : names;
}

/// The launcher's world size when no MPI can tell (mpirun's and torchrun's variables); 1 if unset.
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 1;
}

/// The NCCL group of this rank: MPI's group carries rank 0's unique id to the others, and
/// stays as the channel for failure notices (Note [NCCL's streams and the watchdog]).
std::shared_ptr<ProcessGroup> new_default_nccl_group(const InitOptions& options) {
  KILN_CHECK_AS(DistBackendError, nccl_is_available(), "init_process_group: backend 'nccl' is not in this build (",
                "it has: ", built_backends(), "); NCCL needs the CUDA backend and NCCL at configure time");
  NcclGroupOptions nccl;
  nccl.timeout = options.timeout;
  if (mpi_is_available()) {
    nccl.bootstrap = new_mpi_process_group(options.timeout);
    nccl.rank = nccl.bootstrap->rank();
    nccl.size = nccl.bootstrap->size();
    nccl.local_rank = nccl.bootstrap->local_rank();
    Tensor id = zeros({static_cast<std::int64_t>(nccl.id.size())}, TensorOptions().dtype(kUInt8));
    if (nccl.rank == 0) {
      NcclUniqueId made;
      try {
        made = nccl_unique_id();
      } catch (const std::exception& e) {
        nccl.bootstrap->report_failure(e.what());  // the others wait in the broadcast below
        throw;
      }
      std::memcpy(id.raw_data_ptr(), made.data(), made.size());
    }
    nccl.bootstrap->broadcast(id, 0)->wait();
    std::memcpy(nccl.id.data(), id.raw_data_ptr(), nccl.id.size());
  } else {
    const int world = launcher_world_size();
    KILN_CHECK_AS(DistBackendError, world <= 1, "init_process_group: the launcher started ", world,
                  " ranks, but this build of Kiln has no MPI to hand NCCL's unique id to them (install "
                  "libopenmpi-dev and configure again)");
    nccl.id = nccl_unique_id();
  }
  return new_nccl_process_group(nccl);
}

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, CollectiveOptions o) {
  if (!o.async_op) work->wait();
  return work;
}

}  // namespace

std::chrono::milliseconds default_timeout() {
  const char* text = std::getenv("KILN_DIST_TIMEOUT");
  if (text == nullptr || *text == '\0') return std::chrono::minutes(30);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  KILN_CHECK_VALUE(*end == '\0' && seconds > 0 && seconds <= 1e7, "KILN_DIST_TIMEOUT must be a positive number of "
                   "seconds (at most 1e7), got '", text, "'");
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
}

void init_process_group(const InitOptions& options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  KILN_CHECK_VALUE(!g_default, "trying to initialize the default process group twice!");
  KILN_CHECK_VALUE(options.backend == "mpi" || options.backend == "nccl", "init_process_group: unknown backend '",
                   options.backend, "' (Kiln has mpi and nccl; this build has: ", built_backends(), ")");
  g_default = options.backend == "mpi" ? new_mpi_process_group(options.timeout) : new_default_nccl_group(options);
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

void check_same_across_ranks(const std::vector<std::pair<std::string, std::int64_t>>& values) {
  ProcessGroup& group = default_group();
  if (values.empty()) return;
  const auto count = static_cast<std::int64_t>(values.size());
  std::vector<std::int64_t> mine;
  for (const auto& [name, value] : values) mine.push_back(value);
  const Tensor local = tensor(mine, {count});
  std::vector<Tensor> all;
  for (int r = 0; r < group.size(); ++r) all.push_back(empty({count}, TensorOptions().dtype(kInt64)));
  group.all_gather(all, local)->wait();
  for (std::int64_t i = 0; i < count; ++i) {
    bool same = true;
    std::string each;
    for (int r = 0; r < group.size(); ++r) {
      const std::int64_t v = all[static_cast<std::size_t>(r)].data_ptr<std::int64_t>()[i];
      same = same && v == mine[static_cast<std::size_t>(i)];
      each += (r ? ", rank " : "rank ") + std::to_string(r) + " has " + std::to_string(v);
    }
    KILN_CHECK_AS(DistBackendError, same, "ranks disagree on ", values[static_cast<std::size_t>(i)].first, ": ", each);
  }
}

}  // namespace kiln::distributed
