// distributed/process_group.cpp — the work handle, and the argument checks every backend
// shares (so a wrong call fails the same way on MPI and NCCL, before anything is sent).
#include "distributed/process_group.h"

#include <sstream>

#include "core/profiler_hooks.h"

#include "core/array_ref.h"
#include "core/capture_hooks.h"
#include "core/grad_mode.h"

namespace kiln::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

Work::Work(std::string description, std::chrono::milliseconds timeout, std::function<std::string()> diagnose,
           std::function<void()> finish)
    : description_(std::move(description)),
      timeout_(timeout),
      diagnose_(std::move(diagnose)),
      finish_(std::move(finish)) {}

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, timeout_, [&] { return completed_ || error_.has_value(); })) {
    lock.unlock();
    const std::string why = diagnose_ ? diagnose_() : std::string();
    KILN_CHECK_AS(DistBackendError, false, description_, " timed out after ", timeout_.count(), " ms", why);
  }
  if (error_) KILN_CHECK_AS(DistBackendError, false, description_, " failed: ", *error_);
  if (finished_) return;
  finished_ = true;
  lock.unlock();
  if (finish_) finish_();
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

Work::Clock::time_point Work::posted_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return posted_at_;
}

Work::Clock::time_point Work::completed_at() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_at_;
}

void Work::mark_posted() {
  std::lock_guard<std::mutex> lock(mutex_);
  posted_at_ = Clock::now();
}

void Work::mark_completed() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_) return;  // failed already (a peer reported its failure): the error stands
    completed_at_ = Clock::now();
    completed_ = true;
  }
  changed_.notify_all();
}

void Work::mark_failed(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (completed_ || error_) return;
    error_ = message;
  }
  changed_.notify_all();
}

ProcessGroup::ProcessGroup(int rank, int size, int local_rank, std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), local_rank_(local_rank), timeout_(timeout) {
  KILN_CHECK_VALUE(size > 0 && rank >= 0 && rank < size, "a process group needs 0 <= rank < size, got rank ", rank,
                   " of ", size);
  KILN_CHECK_VALUE(timeout.count() > 0, "a process group's timeout must be positive, got ", timeout.count(), " ms");
}

namespace {

void check_defined(const Tensor& t, const char* collective) {
  KILN_CHECK_VALUE(t.defined(), collective, ": the tensor is undefined");
}

void check_like(const Tensor& t, const Tensor& reference, const char* collective, const char* what, std::size_t i) {
  check_defined(t, collective);
  KILN_CHECK_VALUE(t.sizes() == reference.sizes() && t.dtype() == reference.dtype() &&
                       t.device() == reference.device(),
                   collective, ": ", what, "[", i, "] must match the input (", reference.sizes(), ", ",
                   reference.dtype(), ", ", reference.device(), "), got ", t.sizes(), ", ", t.dtype(),
                   ", ", t.device());
}

// Note [Collectives in a profile]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Each collective is one span named as PyTorch's traces name the host side of every backend's
// call, the c10d op ("c10d::allreduce_", "c10d::broadcast_", "c10d::allgather_",
// "c10d::reduce_scatter_", "c10d::barrier"), with record_param_comms's args: "Collective name",
// "dtype", "In msg nelems", "Out msg nelems", "Group size", "Rank", and Kiln's "In msg bytes" and
// "Backend". It spans the call, which posts the transfer: the transfer itself is the Work's,
// and its wait() is the caller's time, in the caller's own span. It is recorded here, above
// both backends, so MPI's and NCCL's collectives read alike; on a thread that does not record
// ops (a rank's thread under a profile started elsewhere) it gets that thread's lane.
profiler::SpanArgs collective_args(const ProcessGroup& group, const char* name, const Tensor& t,
                                   std::int64_t in_nelems, std::int64_t out_nelems) {
  return {{"Collective name", std::string(name)},
          {"dtype", std::string(t.defined() ? scalar_type_name(t.dtype()) : "")},
          {"In msg nelems", in_nelems},
          {"Out msg nelems", out_nelems},
          {"In msg bytes", in_nelems * static_cast<std::int64_t>(t.defined() ? t.element_size() : 0)},
          {"Group size", static_cast<std::int64_t>(group.size())},
          {"Rank", static_cast<std::int64_t>(group.rank())},
          {"Backend", group.backend()}};
}

void check_avg(const Tensor& t, ReduceOp op, const char* collective) {
  KILN_CHECK_TYPE(op != ReduceOp::AVG || is_floating_point(t.dtype()), collective,
                  ": ReduceOp.AVG needs a floating-point tensor, got ", t.dtype(), " (use SUM and divide)");
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_defined(tensor, "all_reduce");
  check_avg(tensor, op, "all_reduce");
  const profiler::Span span("c10d::allreduce_", profiler::SpanKind::Collective,
                            [&] { return collective_args(*this, "allreduce", tensor, tensor.numel(), tensor.numel()); });
  if (capture::observer() == nullptr) return do_all_reduce(tensor, op);
  // A captured step (DDP's buckets inside backward, Note [Capturing a step]) replays the
  // transfer as a region: the sum, waited for on the spot. AVG's division is a kernel that
  // wait() runs afterwards, and the capture records it there. A tensor MPI cannot use in place
  // would be copied back by wait() from a staging buffer of this call: not replayable.
  if (!tensor.is_cpu() || !tensor.is_contiguous()) {
    capture::not_replayable("a collective (all_reduce) on a tensor that needs staging");
    return do_all_reduce(tensor, op);
  }
  capture::Region region(
      "all_reduce",
      [this, tensor, op]() mutable { do_all_reduce(tensor, op == ReduceOp::AVG ? ReduceOp::SUM : op)->wait(); },
      {&tensor});
  return do_all_reduce(tensor, op);
}

std::shared_ptr<Work> ProcessGroup::broadcast(Tensor& tensor, int src) {
  capture::not_replayable("a collective (broadcast)");
  check_defined(tensor, "broadcast");
  KILN_CHECK_VALUE(src >= 0 && src < size_, "broadcast: src rank ", src, " is not in the group of ", size_);
  const profiler::Span span("c10d::broadcast_", profiler::SpanKind::Collective,
                            [&] { return collective_args(*this, "broadcast", tensor, tensor.numel(), tensor.numel()); });
  return do_broadcast(tensor, src);
}

std::shared_ptr<Work> ProcessGroup::all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  capture::not_replayable("a collective (all_gather)");
  check_defined(input, "all_gather");
  KILN_CHECK_VALUE(outputs.size() == static_cast<std::size_t>(size_),
                   "all_gather: the output list must hold one tensor per rank (", size_, "), got ", outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) check_like(outputs[i], input, "all_gather", "outputs", i);
  const profiler::Span span("c10d::allgather_", profiler::SpanKind::Collective, [&] {
    return collective_args(*this, "allgather", input, input.numel(), input.numel() * size_);
  });
  return do_all_gather(outputs, input);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  capture::not_replayable("a collective (reduce_scatter)");
  check_defined(output, "reduce_scatter");
  check_avg(output, op, "reduce_scatter");
  KILN_CHECK_VALUE(inputs.size() == static_cast<std::size_t>(size_),
                   "reduce_scatter: the input list must hold one tensor per rank (", size_, "), got ", inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) check_like(inputs[i], output, "reduce_scatter", "inputs", i);
  const profiler::Span span("c10d::reduce_scatter_", profiler::SpanKind::Collective, [&] {
    return collective_args(*this, "reduce_scatter", output, output.numel() * size_, output.numel());
  });
  return do_reduce_scatter(output, inputs, op);
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  capture::not_replayable("a collective (barrier)");
  const profiler::Span span("c10d::barrier", profiler::SpanKind::Collective,
                            [&] { return collective_args(*this, "barrier", Tensor(), 0, 0); });
  return do_barrier();
}

std::string ProcessGroup::describe(const char* collective, const Tensor& t, const char* detail) {
  std::ostringstream os;
  os << collective << " (" << t.dtype() << " " << t.sizes();
  if (*detail) os << ", " << detail;
  os << ")";
  return os.str();
}

std::function<void()> ProcessGroup::copy_gathered(std::vector<Tensor> targets, Tensor gathered, const Tensor& input) {
  const Shape shape = input.sizes().vec();
  const std::int64_t count = input.numel();
  return [targets = std::move(targets), gathered = std::move(gathered), shape, count]() mutable {
    NoGradGuard no_grad;
    for (std::size_t r = 0; r < targets.size(); ++r) {
      targets[r].copy_(gathered.narrow(0, static_cast<std::int64_t>(r) * count, count).view(shape));
    }
  };
}

}  // namespace kiln::distributed
