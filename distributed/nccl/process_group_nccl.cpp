// distributed/nccl/process_group_nccl.cpp — the NCCL backend (Note [NCCL's streams and the
// watchdog]). Built when CMake finds NCCL beside the CUDA backend; distributed/nccl/stub.cpp
// stands in otherwise.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>

#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/grad_mode.h"
#include "distributed/process_group_nccl.h"

namespace kiln::distributed {

bool nccl_is_available() { return true; }

namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId), "NcclUniqueId must hold NCCL's id");

std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  }
  return text;
}

/// What NCCL calls a tensor's type. Int16 has no NCCL type: it travels widened to Int32.
DType wire_dtype(DType t) { return t == DType::Int16 ? DType::Int32 : t; }

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Int64: return ncclInt64;
    case DType::Int32: return ncclInt32;
    case DType::Int8: return ncclInt8;
    case DType::UInt8:
    case DType::Bool: return ncclUint8;
    case DType::Int16: break;
  }
  KILN_FAIL("NCCL: no NCCL datatype for ", t);
}

ncclRedOp_t nccl_op(DType t, ReduceOp op) {
  if (t == DType::Bool) return op == ReduceOp::MIN ? ncclMin : ncclMax;  // a sum of truths is "any"
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::MAX: return ncclMax;
  }
  return ncclSum;
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  explicit NcclProcessGroup(const NcclGroupOptions& o)
      : ProcessGroup(o.rank, o.size, o.local_rank, o.timeout), bootstrap_(o.bootstrap) {
    KILN_CHECK_AS(DistBackendError, cuda::is_available(),
                  "ProcessGroupNCCL is only supported with GPUs, no GPUs found!");
    device_ = o.device >= 0 ? o.device : o.local_rank % cuda::device_count();
    KILN_CHECK_VALUE(device_ < cuda::device_count(), "NCCL process group: device cuda:", device_,
                     " does not exist (this machine has ", cuda::device_count(), ")");
    cuda::DeviceGuard on(device_);
    stream_ = cuda::Stream::create(device_);
    ncclUniqueId id;
    std::memcpy(&id, o.id.data(), sizeof id);
    // Non-blocking: NCCL returns at once and this thread polls, so that a peer that never
    // joins ends in a timeout instead of a hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t started = ncclCommInitRankConfig(&comm_, size(), id, rank(), &config);
    const std::string joining = "NCCL communicator init (rank " + std::to_string(rank()) + " of " +
                                std::to_string(size()) + " on cuda:" + std::to_string(device_) + ")";
    if (started != ncclSuccess && started != ncclInProgress) {
      const std::string why = nccl_error_text(started, comm_);
      if (comm_ != nullptr) ncclCommAbort(comm_);
      KILN_CHECK_AS(DistBackendError, false, joining, " failed: ", why);
    }
    settle(joining);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclProcessGroup() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (aborted_) return;
    // Collectives still in flight finish first; a group that cannot end cleanly aborts.
    bool clean = false;
    try {
      cuda::DeviceGuard on(device_);
      const auto deadline = Work::Clock::now() + timeout();
      bool idle = stream_.query();
      while (!idle && Work::Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        idle = stream_.query();
      }
      if (idle) {
        for (Pending& p : pending_) p.work->mark_completed();
        pending_.clear();
        const ncclResult_t finalizing = ncclCommFinalize(comm_);
        if (finalizing == ncclSuccess || finalizing == ncclInProgress) {
          settle("NCCL communicator finalize");
          ncclCommDestroy(comm_);
          clean = true;
        }
      }
    } catch (...) {
      // A destructor must not throw: what failed is aborted below.
    }
    if (!clean) fail_everything("the process group was destroyed");
  }

  std::string backend() const override { return "nccl"; }

  void report_failure(const std::string& message) override {
    if (bootstrap_) bootstrap_->report_failure(message);
  }

  std::optional<std::string> peer_failure() override {
    return bootstrap_ ? bootstrap_->peer_failure() : std::nullopt;
  }

 protected:
  std::shared_ptr<Work> do_all_reduce(Tensor& tensor, ReduceOp op) override {
    check_tensor(tensor, "all_reduce");
    Tensor staged = staging_for(tensor);
    const std::int64_t count = staged.numel();
    const ncclDataType_t type = nccl_type(staged.dtype());
    const ncclRedOp_t rop = nccl_op(staged.dtype(), op);
    void* data = staged.raw_data_ptr();
    return launch(describe("all_reduce", tensor, reduce_op_name(op)), {tensor, staged},
                  [=, this](cudaStream_t s) {
                    return ncclAllReduce(data, data, static_cast<std::size_t>(count), type, rop, comm_, s);
                  },
                  copy_back(tensor, staged));
  }

  std::shared_ptr<Work> do_broadcast(Tensor& tensor, int src) override {
    check_tensor(tensor, "broadcast");
    Tensor staged = staging_for(tensor);
    const std::int64_t count = staged.numel();
    const ncclDataType_t type = nccl_type(staged.dtype());
    void* data = staged.raw_data_ptr();
    return launch(describe("broadcast", tensor, ("src " + std::to_string(src)).c_str()), {tensor, staged},
                  [=, this](cudaStream_t s) {
                    return ncclBroadcast(data, data, static_cast<std::size_t>(count), type, src, comm_, s);
                  },
                  copy_back(tensor, staged));
  }

  std::shared_ptr<Work> do_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    check_tensor(input, "all_gather");
    for (const Tensor& t : outputs) check_tensor(t, "all_gather");
    const Tensor source = staging_for(input);
    const Tensor gathered = empty({static_cast<std::int64_t>(size()) * source.numel()},
                                  TensorOptions().dtype(source.dtype()).device(source.device()));
    const std::int64_t count = source.numel();
    const ncclDataType_t type = nccl_type(source.dtype());
    const void* in = source.raw_data_ptr();
    void* out = gathered.raw_data_ptr();
    auto finish = copy_gathered(outputs, gathered, input);  // shares the storages the caller reads
    std::vector<Tensor> held = outputs;
    held.push_back(source);
    held.push_back(gathered);
    return launch(describe("all_gather", input, ""), std::move(held),
                  [=, this](cudaStream_t s) {
                    return ncclAllGather(in, out, static_cast<std::size_t>(count), type, comm_, s);
                  },
                  std::move(finish));
  }

  std::shared_ptr<Work> do_reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    check_tensor(output, "reduce_scatter");
    for (const Tensor& t : inputs) check_tensor(t, "reduce_scatter");
    const Tensor source = stack(inputs).to(wire_dtype(output.dtype())).contiguous();
    Tensor staged = staging_for(output);
    const std::int64_t count = staged.numel();
    const ncclDataType_t type = nccl_type(staged.dtype());
    const ncclRedOp_t rop = nccl_op(staged.dtype(), op);
    const void* in = source.raw_data_ptr();
    void* out = staged.raw_data_ptr();
    return launch(describe("reduce_scatter", output, reduce_op_name(op)), {output, staged, source},
                  [=, this](cudaStream_t s) {
                    return ncclReduceScatter(in, out, static_cast<std::size_t>(count), type, rop, comm_, s);
                  },
                  copy_back(output, staged));
  }

  /// As PyTorch's NCCL barrier: an all-reduce of one element on the group's device.
  std::shared_ptr<Work> do_barrier() override {
    Tensor token;
    {
      cuda::DeviceGuard on(device_);
      token = zeros({1}, TensorOptions().device(Device(DeviceType::CUDA, device_)));
    }
    void* data = token.raw_data_ptr();
    return launch("barrier", {token},
                  [=, this](cudaStream_t s) { return ncclAllReduce(data, data, 1, ncclFloat32, ncclSum, comm_, s); },
                  {});
  }

 private:
  struct Pending {
    std::shared_ptr<Work> work;
    cuda::Event done;
    std::vector<Tensor> held;  // alive until NCCL is done with their memory
    Work::Clock::time_point deadline;
  };

  void check_tensor(const Tensor& t, const char* collective) const {
    KILN_CHECK_VALUE(t.is_cuda(), collective, ": Tensors must be CUDA and dense (the NCCL backend got a ",
                     t.device(), " tensor; use the mpi backend for CPU tensors)");
    const int index = t.device().has_index() ? t.device().index() : cuda::current_device();
    KILN_CHECK_VALUE(index == device_, collective, ": the tensor is on cuda:", index,
                     ", but this rank's NCCL process group uses cuda:", device_);
  }

  /// What NCCL reads and writes for `t`: `t` itself when it is contiguous and of a type NCCL
  /// has, else a contiguous copy (Int16 widened) whose result copy_back writes into `t`.
  static Tensor staging_for(const Tensor& t) {
    NoGradGuard no_grad;
    if (t.is_contiguous() && wire_dtype(t.dtype()) == t.dtype()) return t;
    return t.to(wire_dtype(t.dtype())).contiguous();
  }

  static std::function<void()> copy_back(Tensor target, Tensor staged) {
    if (staged.raw_data_ptr() == target.raw_data_ptr()) return {};
    return [target, staged]() mutable {
      NoGradGuard no_grad;
      target.copy_(staged);
    };
  }

  /// Waits out ncclInProgress on a non-blocking communicator, up to the group's timeout. On
  /// the thread that called NCCL, holding launch_mutex_ (or before or after the watchdog runs).
  void settle(const std::string& what) {
    const auto deadline = Work::Clock::now() + timeout();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        const std::string why = "NCCL error: " + nccl_error_text(state, comm_);
        fail_everything(why);
        KILN_CHECK_AS(DistBackendError, false, what, " failed: ", why);
      }
      if (Work::Clock::now() >= deadline) {
        const std::string why = "timed out after " + std::to_string(timeout().count()) +
                                " ms (every rank must take part, each with its own device)";
        fail_everything(why);
        KILN_CHECK_AS(DistBackendError, false, what, " ", why);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  /// Queues one collective on the group's stream after the caller's current stream's work,
  /// and hands its completion to the watchdog.
  std::shared_ptr<Work> launch(std::string description, std::vector<Tensor> held,
                               const std::function<ncclResult_t(cudaStream_t)>& collective,
                               std::function<void()> finish) {
    std::lock_guard<std::mutex> order(launch_mutex_);  // one rank's collectives enter NCCL in call order
    std::int64_t number = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_) KILN_CHECK_AS(DistBackendError, false, description, " failed: ", *failure_);
      number = ++sequence_;
    }
    description += " #" + std::to_string(number) + " on rank " + std::to_string(rank()) + " of " +
                   std::to_string(size());
    cuda::DeviceGuard on(device_);
    cuda::Event inputs_ready;
    inputs_ready.record(cuda::current_stream(device_));
    inputs_ready.block(stream_);
    // The watchdog fails a late collective at the timeout; Work's own limit is a backstop.
    auto work = std::make_shared<Work>(description, timeout() + std::chrono::seconds(5),
                                       [] { return std::string(": the NCCL watchdog did not answer"); },
                                       std::move(finish));
    const ncclResult_t result = collective(static_cast<cudaStream_t>(stream_.handle()));
    if (result != ncclSuccess && result != ncclInProgress) {
      const std::string why = "NCCL error: " + nccl_error_text(result, comm_);
      fail_everything(why);
      KILN_CHECK_AS(DistBackendError, false, description, " failed: ", why);
    }
    if (result == ncclInProgress) settle(description);
    cuda::Event done;
    done.record(stream_);
    work->mark_posted();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back({work, std::move(done), std::move(held), Work::Clock::now() + timeout()});
    }
    wake_.notify_all();
    return work;
  }

  /// The watchdog (Note [NCCL's streams and the watchdog]).
  void watch() {
    try {
      cuda::set_device(device_);
    } catch (...) {
    }
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(pending_.empty() ? 100 : 1));
      if (stopping_) return;
      if (failure_) continue;
      std::optional<std::string> why;
      while (!pending_.empty()) {
        bool done = false;
        try {
          done = pending_.front().done.query();
        } catch (const std::exception& e) {
          why = std::string("CUDA error: ") + e.what();
          break;
        }
        if (!done) break;
        pending_.front().work->mark_completed();
        pending_.pop_front();
      }
      if (!why && !pending_.empty() && Work::Clock::now() >= pending_.front().deadline) {
        why = "timed out after " + std::to_string(timeout().count()) +
              " ms: the NCCL communicator was aborted (a rank died, hangs, or did not call this collective; "
              "every rank must call the same collectives in the same order)";
      }
      if (!why) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(comm_, &state);
        if (state != ncclSuccess && state != ncclInProgress) why = "NCCL error: " + nccl_error_text(state, comm_);
      }
      if (!why && bootstrap_) why = bootstrap_->peer_failure();
      if (why) {
        lock.unlock();
        std::lock_guard<std::mutex> no_caller_inside_nccl(launch_mutex_);
        fail_everything(*why);
      }
    }
  }

  /// Aborts the communicator: the collectives in flight and every later one fail with `why`.
  /// The caller holds launch_mutex_ or is alone with the group, so no thread is inside an NCCL
  /// call on the communicator that ncclCommAbort frees; the watchdog's own NCCL calls are
  /// under mutex_ and skip a failed group.
  void fail_everything(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = why;
    if (!aborted_.exchange(true)) ncclCommAbort(comm_);
    for (Pending& p : pending_) p.work->mark_failed(*failure_);
    pending_.clear();
  }

  std::shared_ptr<ProcessGroup> bootstrap_;
  int device_ = 0;
  cuda::Stream stream_{nullptr, 0};
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};
  std::thread watchdog_;
  std::mutex launch_mutex_, mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  std::optional<std::string> failure_;
  std::int64_t sequence_ = 0;
  bool stopping_ = false;
};

}  // namespace

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  KILN_CHECK_AS(DistBackendError, result == ncclSuccess, "ncclGetUniqueId failed: ", ncclGetErrorString(result));
  NcclUniqueId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

std::shared_ptr<ProcessGroup> new_nccl_process_group(const NcclGroupOptions& options) {
  return std::make_shared<NcclProcessGroup>(options);
}

}  // namespace kiln::distributed
