// distributed/mpi/process_group_mpi.cpp — the MPI backend (Note [Two threads talk to MPI]).
// Built when CMake finds MPI; distributed/mpi/stub.cpp stands in otherwise.
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <deque>
#include <set>
#include <thread>

#include "core/creation.h"
#include "core/grad_mode.h"
#include "core/half.h"
#include "distributed/backoff.h"
#include "distributed/fingerprint.h"
#include "distributed/process_group_mpi.h"

namespace kiln::distributed {

bool mpi_is_available() { return true; }

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

// Reductions MPI has no type for: Float16 and BFloat16 travel as 16-bit words and are
// combined in float by these.
template <class Half, ReduceOp kOp>
void reduce_halves(void* in, void* inout, int* length, MPI_Datatype*) {
  const auto* a = static_cast<const Half*>(in);
  auto* b = static_cast<Half*>(inout);
  for (int i = 0; i < *length; ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r = x + y;
    if constexpr (kOp == ReduceOp::MIN) r = std::min(x, y);
    if constexpr (kOp == ReduceOp::MAX) r = std::max(x, y);
    b[i] = static_cast<Half>(r);
  }
}

struct HalfOps {
  MPI_Op half_sum, half_min, half_max, bfloat_sum, bfloat_min, bfloat_max;
};

HalfOps& half_ops() {
  static HalfOps ops;
  return ops;
}

class MpiProcessGroup;

// Which groups are alive, so that the exit handler can stop their threads before
// MPI_Finalize (a group that outlives main must not call MPI afterwards). Never destroyed:
// a group held by another file's static (the default group) is destroyed after this file's
// statics would be.
struct LiveGroups {
  std::mutex mutex;
  std::set<MpiProcessGroup*> groups;
};
LiveGroups& live_groups() {
  static auto* live = new LiveGroups;
  return *live;
}
std::atomic<bool> g_finalized{false};

void finalize_at_exit();

/// Open MPI's non-blocking all-reduce (its libnbc component) reduces along a binomial tree
/// whenever there are fewer than 4 ranks or the reduction is in place, as Kiln's always is: a
/// reduce to rank 0, then a broadcast back. For DDP's 2 MiB buckets on two local ranks that is
/// 0.87 ms against the blocking call's 0.35, and 4.3 ms when polled with sleeps in between.
/// Asked for Rabenseifner's algorithm (reduce-scatter, then all-gather; a ring where that does
/// not apply), it matches or beats the blocking call at every size measured (0.28 ms at 2 MiB).
/// The choice is made for the whole process, and only where nobody made one (mpirun --mca
/// passes it in the same variable): in the environment MPI_Init_thread reads, or, when the
/// program initialised MPI itself, through MPI's tool interface, whose initialisation costs
/// some 0.2 s in Open MPI 4.1. Another MPI library ignores both.
void prefer_rabenseifner_iallreduce(bool mpi_initialised) {
  const std::string name = "coll_libnbc_iallreduce_algorithm", variable = "OMPI_MCA_" + name;
  constexpr int kRabenseifner = 3;  // libnbc's numbering: 1 ring, 2 binomial, 3 Rabenseifner
  if (std::getenv(variable.c_str()) != nullptr) return;
  if (!mpi_initialised) {
    setenv(variable.c_str(), std::to_string(kRabenseifner).c_str(), /*overwrite=*/0);
    return;
  }
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
  int index = 0, count = 0;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_get_index(name.c_str(), &index) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    int algorithm = -1;
    if (count == 1 && MPI_T_cvar_read(handle, &algorithm) == MPI_SUCCESS && algorithm == 0) {  // 0: libnbc picks
      MPI_T_cvar_write(handle, &kRabenseifner);
    }
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
}

void initialise_mpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialised = 0;
    MPI_Initialized(&initialised);
    int provided = MPI_THREAD_SINGLE;
    prefer_rabenseifner_iallreduce(initialised != 0);
    if (initialised) {
      MPI_Query_thread(&provided);
    } else {
      const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      KILN_CHECK_AS(DistBackendError, rc == MPI_SUCCESS, "MPI_Init_thread failed: ", mpi_error_text(rc));
      std::atexit(finalize_at_exit);
    }
    KILN_CHECK_AS(DistBackendError, provided >= MPI_THREAD_MULTIPLE, "the MPI library offers thread level ",
                  provided, ", Kiln's process group needs MPI_THREAD_MULTIPLE (Note [Two threads talk to MPI])");
    HalfOps& ops = half_ops();
    MPI_Op_create(&reduce_halves<Eigen::half, ReduceOp::SUM>, 1, &ops.half_sum);
    MPI_Op_create(&reduce_halves<Eigen::half, ReduceOp::MIN>, 1, &ops.half_min);
    MPI_Op_create(&reduce_halves<Eigen::half, ReduceOp::MAX>, 1, &ops.half_max);
    MPI_Op_create(&reduce_halves<Eigen::bfloat16, ReduceOp::SUM>, 1, &ops.bfloat_sum);
    MPI_Op_create(&reduce_halves<Eigen::bfloat16, ReduceOp::MIN>, 1, &ops.bfloat_min);
    MPI_Op_create(&reduce_halves<Eigen::bfloat16, ReduceOp::MAX>, 1, &ops.bfloat_max);
  });
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Float16:
    case DType::BFloat16: return MPI_UINT16_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int16: return MPI_INT16_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Bool: return MPI_C_BOOL;
  }
  KILN_FAIL("MPI: no MPI datatype for ", t);
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  const HalfOps& h = half_ops();
  if (t == DType::Float16) return op == ReduceOp::MIN ? h.half_min : op == ReduceOp::MAX ? h.half_max : h.half_sum;
  if (t == DType::BFloat16) {
    return op == ReduceOp::MIN ? h.bfloat_min : op == ReduceOp::MAX ? h.bfloat_max : h.bfloat_sum;
  }
  if (t == DType::Bool) return op == ReduceOp::MIN ? MPI_LAND : MPI_LOR;  // a sum of truths is "any"
  return op == ReduceOp::MIN ? MPI_MIN : op == ReduceOp::MAX ? MPI_MAX : MPI_SUM;
}

int mpi_count(const Tensor& t) {
  KILN_CHECK_VALUE(t.numel() <= INT_MAX, "MPI: a collective moves at most ", INT_MAX, " elements, got ", t.numel());
  return static_cast<int>(t.numel());
}

bool mpi_is_cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() == 1;
#else
  return false;
#endif
}

/// What MPI reads and writes for `t`: `t` itself when MPI can use its memory as it is, else a
/// contiguous host copy (pinned for a CUDA tensor) whose result `finish` copies back.
Tensor staging_for(const Tensor& t) {
  if (t.is_contiguous() && (t.is_cpu() || mpi_is_cuda_aware())) return t;
  if (t.is_cuda()) return t.to(kCPU).pin_memory();
  return t.contiguous();
}

// Side-channel messages (Note [Nothing hangs forever]).
enum Notice : int { kPing = 1, kPong = 2, kFailed = 3, kFailedSeen = 4 };

// How often the watchdog looks at the side channel (sending a notice or a probe wakes it at
// once). Each look costs some 15 us of CPU, 1.5% of a core. Every 10 ms would cut that, but
// on a 2-core machine shared with other builds (as CI's is) the ranks' compute then got
// markedly less of the CPU (bench_distributed's MlpStep without DDP: 2.9 ms a step -> 5.3 ms,
// 20 alternating runs), an effect of the kernel's scheduler under load that this thread's
// frequent wake-ups happen to avoid.
constexpr std::chrono::milliseconds kWatchPeriod{1};

class MpiProcessGroup final : public ProcessGroup {
 public:
  static std::shared_ptr<MpiProcessGroup> create(std::chrono::milliseconds timeout) {
    initialise_mpi();
    KILN_CHECK_AS(DistBackendError, !g_finalized.load(), "MPI was finalised: no new process group after exit began");
    int rank = 0, size = 1, local_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    auto group = std::shared_ptr<MpiProcessGroup>(new MpiProcessGroup(rank, size, local_rank, timeout));
    group->weak_self_ = group;
    // Named, so that `top -H` shows which one uses the CPU.
    group->collective_thread_ = std::thread([g = group.get()] {
      pthread_setname_np(pthread_self(), "kiln-collective");
      g->run_collectives();
    });
    group->watchdog_thread_ = std::thread([g = group.get()] {
      pthread_setname_np(pthread_self(), "kiln-watchdog");
      g->watch();
    });
    return group;
  }

  ~MpiProcessGroup() override {
    shut_down();
    LiveGroups& live = live_groups();
    std::lock_guard<std::mutex> lock(live.mutex);
    live.groups.erase(this);
  }

  std::string backend() const override { return "mpi"; }

  /// Stops both threads and frees the communicators. Called by the destructor and, before
  /// MPI_Finalize, by the exit handler. A collective still in flight cannot be cancelled: its
  /// thread gives up polling it and ends on its own, holding the group until then, and the
  /// communicators stay, since MPI may still use them.
  void shut_down() {
    bool in_flight = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (shut_down_) return;
      shut_down_ = true;
      stopping_ = true;
      in_flight = in_flight_ != nullptr;
      for (Operation& op : queue_) op.work->mark_failed("the process group was shut down");
      queue_.clear();
    }
    wake_.notify_all();
    watch_wake_.notify_all();
    if (watchdog_thread_.joinable()) watchdog_thread_.join();
    if (collective_thread_.joinable()) {
      if (in_flight || collective_thread_.get_id() == std::this_thread::get_id()) {
        collective_thread_.detach();
        if (in_flight) stuck_ = true;
      } else {
        collective_thread_.join();
      }
    }
    if (!stuck_ && !g_finalized.load()) {
      MPI_Comm_free(&data_);
      MPI_Comm_free(&control_);
      MPI_Comm_free(&fingerprints_);
    }
  }
  bool stuck() const { return stuck_; }

  void report_failure(const std::string& message) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (shut_down_ || size() == 1) return;
    failure_to_send_ = message;
    watch_wake_.notify_all();
    // Until every peer has seen it (or a second has passed): a process that exits at once
    // could otherwise take the notice with it.
    state_changed_.wait_for(lock, std::chrono::seconds(1),
                            [&] { return failure_seen_by_ + 1 >= size() || shut_down_; });
  }

  std::optional<std::string> peer_failure() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return peer_failure_;
  }

 protected:
  std::shared_ptr<Work> do_all_reduce(Tensor& tensor, ReduceOp op) override {
    Tensor staged = staging_for(tensor);
    const int count = mpi_count(staged);
    const MPI_Datatype type = mpi_type(staged.dtype());
    const MPI_Op mop = mpi_op(staged.dtype(), op);
    void* data = staged.raw_data_ptr();
    return enqueue(describe("all_reduce", tensor, reduce_op_name(op)),
                   CollectiveFingerprint::of(Collective::AllReduce, tensor.dtype(), count, op),
                   [=, this](MPI_Request* r) { return MPI_Iallreduce(MPI_IN_PLACE, data, count, type, mop, data_, r); },
                   finisher(tensor, staged, op));
  }

  std::shared_ptr<Work> do_broadcast(Tensor& tensor, int src) override {
    Tensor staged = staging_for(tensor);
    const int count = mpi_count(staged);
    const MPI_Datatype type = mpi_type(staged.dtype());
    void* data = staged.raw_data_ptr();
    return enqueue(describe("broadcast", tensor, ("src " + std::to_string(src)).c_str()),
                   CollectiveFingerprint::of(Collective::Broadcast, tensor.dtype(), count, std::nullopt, src),
                   [=, this](MPI_Request* r) { return MPI_Ibcast(data, count, type, src, data_, r); },
                   finisher(tensor, staged, ReduceOp::SUM));
  }

  std::shared_ptr<Work> do_all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    const Tensor source = input.to(kCPU).contiguous();
    const int count = mpi_count(source);
    const Tensor gathered = empty({static_cast<std::int64_t>(size()) * source.numel()},
                                  TensorOptions().dtype(source.dtype()));
    const MPI_Datatype type = mpi_type(source.dtype());
    const void* in = source.raw_data_ptr();
    void* out = gathered.raw_data_ptr();
    // The finish shares the storages the caller reads after wait(); `source` lives until then.
    auto finish = [copy = copy_gathered(outputs, gathered, input), source] { copy(); };
    return enqueue(describe("all_gather", input, ""),
                   CollectiveFingerprint::of(Collective::AllGather, input.dtype(), count),
                   [=, this](MPI_Request* r) { return MPI_Iallgather(in, count, type, out, count, type, data_, r); },
                   std::move(finish));
  }

  std::shared_ptr<Work> do_reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    TensorList host;
    for (const Tensor& t : inputs) host.push_back(t.to(kCPU));
    const Tensor source = stack(host).contiguous();
    Tensor staged = staging_for(output);
    const int count = mpi_count(staged);
    const MPI_Datatype type = mpi_type(staged.dtype());
    const MPI_Op mop = mpi_op(staged.dtype(), op);
    const void* in = source.raw_data_ptr();
    void* out = staged.raw_data_ptr();
    auto finish = finisher(output, staged, op);
    return enqueue(describe("reduce_scatter", output, reduce_op_name(op)),
                   CollectiveFingerprint::of(Collective::ReduceScatter, output.dtype(), count, op),
                   [=, this](MPI_Request* r) { return MPI_Ireduce_scatter_block(in, out, count, type, mop, data_, r); },
                   [finish, source] { finish(); });
  }

  std::shared_ptr<Work> do_barrier() override {
    return enqueue(std::string("barrier"), CollectiveFingerprint::of(Collective::Barrier),
                   [this](MPI_Request* r) { return MPI_Ibarrier(data_, r); }, {});
  }

 private:
  MpiProcessGroup(int rank, int size, int local_rank, std::chrono::milliseconds timeout)
      : ProcessGroup(rank, size, local_rank, timeout) {
    // Communicators of our own: collectives never meet the user's MPI traffic, the side
    // channel never queues behind a collective, and the watchdog, which receives whatever
    // arrives on the side channel, never takes a fingerprint meant for the collective thread.
    for (MPI_Comm* comm : {&data_, &control_, &fingerprints_}) {
      MPI_Comm_dup(MPI_COMM_WORLD, comm);
      MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    }
    {
      LiveGroups& live = live_groups();
      std::lock_guard<std::mutex> lock(live.mutex);
      live.groups.insert(this);
    }
  }

  struct Operation {
    CollectiveFingerprint fingerprint;
    std::function<int(MPI_Request*)> post;  // starts the non-blocking MPI collective
    std::shared_ptr<Work> work;
  };

  struct Outgoing {
    std::vector<char> bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  /// Copies the staged result back into `target`, after AVG's division by the world size.
  std::function<void()> finisher(Tensor target, Tensor staged, ReduceOp op) const {
    const int world = size();
    return [target, staged, op, world]() mutable {
      NoGradGuard no_grad;
      if (op == ReduceOp::AVG) staged.div_(world);
      if (staged.impl()->data() != target.impl()->data()) target.copy_(staged);  // addresses, not data
    };
  }

  std::shared_ptr<Work> enqueue(std::string description, CollectiveFingerprint fingerprint,
                                std::function<int(MPI_Request*)> post, std::function<void()> finish) {
    std::lock_guard<std::mutex> lock(mutex_);
    KILN_CHECK_AS(DistBackendError, !shut_down_, description, ": the process group was destroyed");
    fingerprint.sequence = ++sequence_;
    description += " #" + std::to_string(sequence_) + " on rank " + std::to_string(rank()) + " of " +
                   std::to_string(size());
    auto work = std::make_shared<Work>(std::move(description), timeout(), [this] { return diagnose(); },
                                       std::move(finish));
    queue_.push_back({fingerprint, std::move(post), work});
    wake_.notify_all();
    return work;
  }

  /// The collective thread (Note [Two threads talk to MPI]). Holds the group while a
  /// collective runs, so that a group dropped meanwhile outlives the call.
  void run_collectives() {
    for (;;) {
      Operation op;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) break;
        op = std::move(queue_.front());
        queue_.pop_front();
        if (peer_failure_) {
          op.work->mark_failed(*peer_failure_);
          continue;
        }
        in_flight_ = op.work;
      }
      const std::shared_ptr<MpiProcessGroup> self = weak_self_.lock();
      op.work->mark_posted();
      const std::optional<std::string> error = run(op);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        in_flight_.reset();
      }
      if (!error) {
        op.work->mark_completed();
      } else {
        op.work->mark_failed(*error);
      }
      if (self.use_count() == 1) {
        // The last holder let go during the call: this thread ends the group.
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        break;
      }
    }
  }

  /// One collective on the collective thread: the fingerprints first (Note [Collective
  /// fingerprints]), then the data. Returns the error to fail it with, if any.
  std::optional<std::string> run(Operation& op) {
    if (size() > 1) {
      std::optional<std::string> refused = agree_on(op.fingerprint);
      std::lock_guard<std::mutex> lock(mutex_);
      awaiting_.clear();
      if (refused) return refused;
      if (peer_failure_) {
        stuck_ = true;  // a peer that reported its failure may never post this collective
        return *peer_failure_;
      }
    }
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = op.post(&request);
    if (rc != MPI_SUCCESS) return mpi_error_text(rc);
    std::optional<std::string> error = await(request);
    if (error && request != MPI_REQUEST_NULL) {
      // MPI cannot cancel a collective: it may still write into its buffers (held by the
      // operation's finish), and its communicator is unusable, so this group will not free it
      // and the exit handler will not finalise (Note [Nothing hangs forever]).
      std::lock_guard<std::mutex> lock(mutex_);
      stuck_ = true;
      abandoned_.push_back(std::move(op));
    }
    return error;
  }

  /// Polls one collective until it completes (Note [Waiting without spinning]); gives up when
  /// a peer reports its failure or the group shuts down, and says why.
  std::optional<std::string> await(MPI_Request& request) {
    Backoff backoff;
    for (;;) {
      int done = 0;
      const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return mpi_error_text(rc);
      if (done) return std::nullopt;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (peer_failure_) return *peer_failure_;
        if (stopping_) return std::string("the process group was shut down");
      }
      backoff.pause();
    }
  }

  /// Sends this rank's fingerprint to every peer and waits for theirs; nullopt when they all
  /// match. On the collective thread only, one collective at a time, which is what keeps the
  /// k-th message from each peer that peer's k-th fingerprint.
  std::optional<std::string> agree_on(const CollectiveFingerprint& mine) {
    const auto world = static_cast<std::size_t>(size());
    fingerprint_out_ = mine.to_wire();
    fingerprint_in_.assign(world, {});
    std::vector<int> peers;
    std::vector<MPI_Request> requests;  // 2k: the receive from peers[k], 2k + 1: the send to it
    const int words = static_cast<int>(fingerprint_out_.size());
    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank()) continue;
      peers.push_back(peer);
      MPI_Irecv(fingerprint_in_[static_cast<std::size_t>(peer)].data(), words, MPI_INT64_T, peer, 0, fingerprints_,
                &requests.emplace_back());
      MPI_Isend(fingerprint_out_.data(), words, MPI_INT64_T, peer, 0, fingerprints_, &requests.emplace_back());
    }
    if (std::optional<std::string> error = await_fingerprints(mine, peers, requests)) {
      // Given up (a peer failed, or the group is shutting down): no later collective of this
      // group exchanges fingerprints, and the buffers are members, alive while MPI needs them.
      for (std::size_t i = 0; i < requests.size(); i += 2) {
        if (requests[i] != MPI_REQUEST_NULL) MPI_Cancel(&requests[i]);
      }
      for (MPI_Request& r : requests) {
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
      }
      return error;
    }
    std::vector<CollectiveFingerprint> by_rank;
    for (std::size_t r = 0; r < world; ++r) {
      by_rank.push_back(r == static_cast<std::size_t>(rank()) ? mine
                                                               : CollectiveFingerprint::from_wire(fingerprint_in_[r]));
    }
    return fingerprint_mismatch(by_rank);
  }

  /// Polls the fingerprint exchange until it is complete (Note [Waiting without spinning]),
  /// keeping the peers not heard from yet in `awaiting_` for diagnose(). Gives up when a peer
  /// reports its failure or the group shuts down, and says why.
  std::optional<std::string> await_fingerprints(const CollectiveFingerprint& mine, const std::vector<int>& peers,
                                                std::vector<MPI_Request>& requests) {
    std::vector<int> completed(requests.size());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      awaiting_for_ = mine;
    }
    Backoff backoff;
    for (;;) {
      int count = 0;
      const int rc = MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &count, completed.data(),
                                  MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return mpi_error_text(rc);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        awaiting_.clear();
        for (std::size_t k = 0; k < peers.size(); ++k) {
          if (requests[2 * k] != MPI_REQUEST_NULL) awaiting_.push_back(peers[k]);
        }
        const bool done = std::all_of(requests.begin(), requests.end(),
                                      [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
        if (done) return std::nullopt;
        if (peer_failure_) {
          stuck_ = true;  // the peer may be gone, and MPI_Finalize would wait for it
          return *peer_failure_;
        }
        if (stopping_) return std::string("the process group was shut down");
      }
      backoff.pause();
    }
  }

  /// The watchdog thread: the side channel every kWatchPeriod, and the failure of the
  /// collective in flight when a peer reports its own.
  void watch() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        watch_wake_.wait_for(lock, kWatchPeriod,
                             [&] { return stopping_ || failure_to_send_ || (probe_requested_ && !probing_); });
        if (stopping_) break;
      }
      service_side_channel();
      std::lock_guard<std::mutex> lock(mutex_);
      if (peer_failure_) {
        // The collective in flight is failed by its own thread, which sees this at its next
        // poll (after a last look at the fingerprints: a peer that failed on a mismatch has
        // sent its own, and this rank then reports the mismatch in its own words).
        for (Operation& op : queue_) op.work->mark_failed(*peer_failure_);
        queue_.clear();
      }
    }
  }

  void send(int peer, Notice kind, const std::string& text = {}) {
    Outgoing& out = outgoing_.emplace_back();
    out.bytes.assign(text.begin(), text.end());
    MPI_Isend(out.bytes.data(), static_cast<int>(out.bytes.size()), MPI_CHAR, peer, kind, control_, &out.request);
  }

  /// Answers pings, records failure notices, sends this rank's own notice and runs a
  /// liveness probe when asked to. On the communication thread only.
  void service_side_channel() {
    std::erase_if(outgoing_, [](Outgoing& o) {
      int done = 0;
      MPI_Test(&o.request, &done, MPI_STATUS_IGNORE);
      return done != 0;
    });
    for (;;) {
      int waiting = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, control_, &waiting, &status);
      if (!waiting) break;
      int length = 0;
      MPI_Get_count(&status, MPI_CHAR, &length);
      std::vector<char> bytes(static_cast<std::size_t>(std::max(length, 0)));
      MPI_Recv(bytes.data(), length, MPI_CHAR, status.MPI_SOURCE, status.MPI_TAG, control_, MPI_STATUS_IGNORE);
      const int peer = status.MPI_SOURCE;
      std::lock_guard<std::mutex> lock(mutex_);
      switch (status.MPI_TAG) {
        case kPing: send(peer, kPong); break;
        case kPong:
          if (probing_) answered_[static_cast<std::size_t>(peer)] = true;
          break;
        case kFailed:
          if (!peer_failure_) {
            peer_failure_ = "rank " + std::to_string(peer) + " failed: " + std::string(bytes.begin(), bytes.end());
          }
          send(peer, kFailedSeen);
          break;
        case kFailedSeen: ++failure_seen_by_; break;
        default: break;
      }
      state_changed_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_to_send_) {
      for (int peer = 0; peer < size(); ++peer) {
        if (peer != rank()) send(peer, kFailed, *failure_to_send_);
      }
      failure_to_send_.reset();
    }
    if (probe_requested_ && !probing_) {
      probing_ = true;
      answered_.assign(static_cast<std::size_t>(size()), false);
      answered_[static_cast<std::size_t>(rank())] = true;
      probe_deadline_ = Work::Clock::now() + probe_grace();
      for (int peer = 0; peer < size(); ++peer) {
        if (peer != rank()) send(peer, kPing);
      }
    }
    if (probing_ && (Work::Clock::now() >= probe_deadline_ ||
                     std::all_of(answered_.begin(), answered_.end(), [](bool a) { return a; }))) {
      probing_ = false;
      probe_requested_ = false;
      probe_result_ = answered_;
      ++probes_done_;
      state_changed_.notify_all();
    }
  }

  std::chrono::milliseconds probe_grace() const { return std::min(timeout(), std::chrono::milliseconds(2000)); }

  /// Why a collective timed out, for its error (on the waiting thread).
  std::string diagnose() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (peer_failure_) return ": " + *peer_failure_;
    if (shut_down_) return "";
    const int before = probes_done_;
    probe_requested_ = true;
    watch_wake_.notify_all();
    state_changed_.wait_for(lock, probe_grace() + std::chrono::milliseconds(500),
                            [&] { return probes_done_ > before || peer_failure_.has_value(); });
    if (peer_failure_) return ": " + *peer_failure_;
    if (probes_done_ == before) return ": the communication thread did not answer";
    std::string silent;
    for (std::size_t r = 0; r < probe_result_.size(); ++r) {
      if (!probe_result_[r]) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!silent.empty()) {
      return ": no answer from rank " + silent + " within " + std::to_string(probe_grace().count()) +
             " ms (the process died or hangs outside Kiln)";
    }
    if (!awaiting_.empty()) {
      // The collective thread is exchanging fingerprints: it knows who has not arrived.
      std::string ranks;
      for (int r : awaiting_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      return ": every rank answers, but rank" + std::string(awaiting_.size() > 1 ? "s " : " ") + ranks +
             (awaiting_.size() > 1 ? " have" : " has") + " not called collective #" +
             std::to_string(awaiting_for_.sequence) + " (here " + awaiting_for_.str() +
             "; every rank must call the same collectives in the same order)";
    }
    return ": every rank answers, so at least one has not called this collective (every rank must call the "
           "same collectives in the same order)";
  }

  MPI_Comm data_ = MPI_COMM_NULL, control_ = MPI_COMM_NULL, fingerprints_ = MPI_COMM_NULL;
  std::weak_ptr<MpiProcessGroup> weak_self_;
  std::thread collective_thread_, watchdog_thread_;
  std::shared_ptr<Work> in_flight_;
  std::mutex mutex_;
  std::condition_variable wake_, watch_wake_, state_changed_;
  std::deque<Operation> queue_;
  std::int64_t sequence_ = 0;
  bool stopping_ = false, shut_down_ = false;
  std::atomic<bool> stuck_{false};
  std::optional<std::string> peer_failure_, failure_to_send_;
  int failure_seen_by_ = 0;
  bool probe_requested_ = false, probing_ = false;
  int probes_done_ = 0;
  std::vector<bool> answered_, probe_result_;
  Work::Clock::time_point probe_deadline_{};
  std::deque<Outgoing> outgoing_;  // a deque: the buffers must not move while MPI sends them
  // The collective thread's own.
  CollectiveFingerprint::Wire fingerprint_out_{};
  std::vector<CollectiveFingerprint::Wire> fingerprint_in_;
  // Shared with diagnose(), under mutex_: the peers whose fingerprint has not come, and ours.
  std::vector<int> awaiting_;
  CollectiveFingerprint awaiting_for_;
  std::vector<Operation> abandoned_;  // collectives given up in flight, whose buffers MPI may still use
};

void finalize_at_exit() {
  bool stuck = false;
  {
    LiveGroups& live = live_groups();
    std::lock_guard<std::mutex> lock(live.mutex);
    for (MpiProcessGroup* g : live.groups) {
      g->shut_down();
      stuck = stuck || g->stuck();
    }
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  // MPI cannot finalise under a collective that never completed; mpirun then reports this
  // process as having exited without finalising, which ends the job.
  if (!finalized && !stuck) MPI_Finalize();
  g_finalized = true;
}

}  // namespace

std::shared_ptr<ProcessGroup> new_mpi_process_group(std::chrono::milliseconds timeout) {
  return MpiProcessGroup::create(timeout);
}

}  // namespace kiln::distributed
