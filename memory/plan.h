// memory/plan.h — predicting a training step's memory before any of it exists: run the step
// on the meta device (shapes, no data), hear every allocation and release in program order,
// and replay them through the allocator algorithm of the device it would run on. Also the
// largest batch that fits a budget. See Note [Planning on the meta device].
//
//   auto report = kiln::memory::plan(model, {{128, 1, 28, 28}}, {{128}, kiln::kInt64},
//                                    [](const kiln::TensorList& p) {
//                                      return std::make_unique<kiln::optim::Adam>(p, kiln::optim::AdamOptions(1e-3));
//                                    });
//   std::cout << report;   // peak allocated/reserved, what is live at the peak, the op
//
// Read next: memory/plan.cpp; core/meta_allocations.h (the hook), core/caching_allocator.h.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "nn/module.h"
#include "optim/optimizer.h"

namespace kiln::memory {

// Note [Planning on the meta device]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// PyTorch explains an out-of-memory error after it happened. Kiln can predict one, because
// everything memory depends on is known without data: which ops run, the shapes they
// allocate, what autograd saves for backward and when each tensor dies.
//  1. The step runs on the meta device: the model's parameters and buffers are swapped for
//     meta twins (Module::swap_tensors; the real ones are untouched), the inputs are meta
//     tensors, and forward, the loss, backward, optimizer.step() and zero_grad() run as
//     usual. Raw ops allocate as they always do and call the meta device's kernels, which
//     compute nothing (Note [The meta device is a backend] in core/meta/register.cpp), so the
//     cost is the host-side work of the step, whatever the batch's data size.
//  2. While it runs, meta tensors *stand for* the target device type: ops take the route
//     they would take there (oneDNN or cuDNN kernels rather than the composite im2col route,
//     the fused Adam update) and autocast casts what it would cast there.
//  3. Every meta storage reports its creation (bytes, shape, the op or creation call that
//     made it) and its release to an observer (core/meta_allocations.h), in program order.
//  4. The events are replayed through the target's allocator algorithm: the CPU allocator's
//     size classes and its cache of freed blocks, or the CUDA caching allocator itself
//     (core/caching_allocator.h) over a pretend device of the real one's capacity, with its
//     block pools, rounding, splitting and out-of-memory retry. The peak, what is live at the
//     peak and the fragmentation there come out of the replay.
// Two steps run: the first creates the optimizer state (Adam's moments, momentum buffers) and
// the second is the steady state every later step repeats, which is the one that runs out of
// memory when the first did not. Live blocks at the peak are sorted by when they were made:
// parameters and buffers; inputs; activations (made by forward and still alive when it ended:
// what autograd saved for backward, and the outputs); gradients (made by backward and alive
// when it ended); optimizer state (made by step() and alive after it); and temporaries
// (everything else: alive only inside the phase that made them).
// The step is `loss = loss_fn(model(x), y); loss.backward(); ...`: the model's output dies once
// the loss is computed, as in Python. A C++ step that holds it longer peaks above its plan:
// a named `output`, or `loss_fn(model(x), y).backward()`, whose temporaries live to the
// end of the full expression, keep the output through backward (for a language model, the
// [batch, context, vocab] logits at the step's peak).
// What it cannot see: memory that kernels take outside Kiln's allocator (oneDNN's, cuDNN's and
// cuBLAS's own workspaces, when they are not given one), and kernel-internal scratch buffers of
// the target route that the meta device skips (see docs/internals.md, "Where the memory goes").

/// The phases of a planned step, in the order they run.
enum class Phase : std::uint8_t { Parameters, Inputs, Forward, Backward, OptimizerStep, ZeroGrad };
const char* phase_name(Phase phase);

/// What a block live at the peak is (Note [Planning on the meta device]).
enum class Category : std::uint8_t { Parameters, Inputs, Activations, Gradients, OptimizerState, Temporaries };
inline constexpr std::size_t kNumCategories = 6;
const char* category_name(Category category);

/// The shape and dtype of a tensor a step takes: the input batch, its targets.
struct TensorSpec {
  std::vector<std::int64_t> sizes{};
  DType dtype = kFloat32;
};

/// One tensor of the planned step.
struct PlannedBlock {
  std::int64_t bytes = 0;      // as the target's allocator counts it (rounded)
  std::int64_t requested = 0;  // as the op asked
  std::vector<std::int64_t> sizes;
  DType dtype = kUInt8;
  bool described = false;  // false: only the byte count is known
  std::string op;          // the op or creation function that made it
  std::string site;        // the user's call site, where one was recorded ("train.cpp:42")
  Phase phase = Phase::Forward;
  int step = 0;  // 1 or 2
  Category category = Category::Temporaries;
};

/// Bytes of one category of live blocks, made by one op.
struct OpBytes {
  std::string op;
  std::int64_t bytes = 0;
  std::int64_t count = 0;
};

/// The prediction: memory_summary()'s figures for the planned steps, and the moment of the peak.
struct MemoryPlan {
  std::string planned;         // what ran ("2 training steps: ...")
  Device device = kCPU;        // the device planned for
  std::int64_t capacity = 0;   // bytes it may use (0: unbounded)
  std::int64_t peak_allocated = 0;
  std::int64_t peak_reserved = 0;
  std::int64_t allocations = 0;  // every allocation of the planned steps
  // At the peak of allocated bytes:
  Phase peak_phase = Phase::Forward;
  int peak_step = 0;
  std::string peak_op;  // the op whose allocation reached the peak
  std::array<std::int64_t, kNumCategories> peak_bytes{};  // by Category
  std::vector<PlannedBlock> top_activations;  // the largest, most first
  std::vector<OpBytes> activations_by_op;     // summed by op, largest first
  std::int64_t reserved_at_peak = 0;
  std::int64_t cached_free_at_peak = 0;     // reserved - allocated
  std::int64_t largest_free_at_peak = 0;    // the largest cached free block
  double fragmentation_at_peak = 0.0;       // 1 - largest / cached free (0 when nothing is free)
  // A replay that ran out of the device's capacity:
  bool out_of_memory = false;
  std::string oom_message;  // the allocator's own message
  std::string oom_op;
  Phase oom_phase = Phase::Forward;

  bool fits() const { return !out_of_memory; }
  /// The report, in memory_summary()'s style.
  std::string summary() const;
};

std::ostream& operator<<(std::ostream& os, const MemoryPlan& plan);

/// Loss of the step: output and target to a scalar (default: cross_entropy).
using LossFunction = std::function<Tensor(const Tensor& output, const Tensor& target)>;
/// Builds the optimizer over the (meta) parameters, as the program does over the real ones.
using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(const TensorList& parameters)>;

struct PlanOptions {
  Device device = kCPU;          // cpu: its size classes and cache; cuda:N: the caching allocator
  bool mixed_precision = false;  // forward and loss under autocast for the device type
  bool train = true;             // false: eval() and NoGradGuard, forward only
  std::size_t top = 8;           // activations listed in the report
  /// Bytes the device may use: 0 means the GPU's total memory for cuda:N (when one is
  /// present) and unbounded otherwise (up to what int64 counts); negative is a ValueError.
  std::int64_t capacity = 0;
  LossFunction loss{};  // default: cross_entropy(output, target)
};

/// Marks the phases of a step function's work (plan's lower-level form).
class PhaseMarker {
 public:
  virtual ~PhaseMarker() = default;
  virtual void enter(Phase phase, int step) = 0;
};

/// The lower-level form: `run` builds whatever it needs on the meta device (kMeta) and runs
/// it, calling marker.enter() as it reaches each phase; every meta allocation in between is
/// planned for options.device. options.mixed_precision, train and loss are the caller's to
/// apply here.
MemoryPlan plan(const std::function<void(PhaseMarker& marker)>& run, const PlanOptions& options = {});

/// Two training steps of `model` (forward, loss, backward, step, zero_grad) on a batch of
/// `input` with `target`, planned for options.device. The model's own tensors are not touched.
/// Every size of `input` and `target` must be at least 1, and in training `make_optimizer`
/// must be set and return an optimizer: otherwise a ValueError before anything runs. A batch
/// of any size is planned (past 2^31 elements a tensor's ops take the Eigen route, as they
/// would run: Note [oneDNN's 32-bit sizes]); a step whose live bytes pass int64 is out of memory.
MemoryPlan plan(nn::Module& model, const TensorSpec& input, const TensorSpec& target,
                const OptimizerFactory& make_optimizer, const PlanOptions& options = {});

/// What max_batch found.
struct BatchSearch {
  std::int64_t batch = 0;  // the largest that fits (0: not even 1)
  std::int64_t budget = 0;
  int plans = 0;           // planning runs it took
  MemoryPlan plan;         // the plan at `batch` (or at 1 when none fits)
};

/// The largest batch (≤ limit) whose planned steady-state step fits in `budget` bytes
/// (peak reserved ≤ budget, and the replay on a device of that size never runs out):
/// doubling from 1, then bisection. `input` and `target` give the shapes of one batch; their
/// first dimension is the batch size and is replaced. A budget of 0 means default_budget(); a
/// negative budget, or a limit below 1, is a ValueError.
BatchSearch max_batch(nn::Module& model, const TensorSpec& input, const TensorSpec& target,
                      const OptimizerFactory& make_optimizer, const PlanOptions& options = {},
                      std::int64_t budget = 0, std::int64_t limit = std::int64_t{1} << 20);

/// What a step may use on `device`: for cuda:N its free memory now, for the CPU the memory
/// the system reports available (MemAvailable); less a margin of 10 % (for the allocator's
/// rounding, other tensors, the CUDA context's later growth).
std::int64_t default_budget(Device device);

}  // namespace kiln::memory
