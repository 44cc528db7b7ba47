// nn/checkpoint.cpp — checkpoint() and checkpoint_sequential(): Note [Activation checkpointing].
#include "nn/checkpoint.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/saved_tensors_hooks.h"
#include "core/capture_hooks.h"
#include "core/grad_mode.h"
#include "core/random.h"

namespace kiln::nn {

namespace {

/// Autocast as it was for one device type.
struct AutocastState {
  DeviceType device_type;
  bool enabled;
  DType dtype;
  static AutocastState of(DeviceType type) {
    return {type, amp::is_autocast_enabled(type), amp::get_autocast_dtype(type)};
  }
};

/// The random streams a region draws from: the CPU generator's state (kept as bytes, outside
/// the tensor allocator, so that checkpointing's own bookkeeping is not a tensor the memory
/// plan would have to know of) and, for a region on CUDA tensors, the CUDA generator's.
struct RandomState {
  std::vector<std::uint8_t> cpu;
  Tensor cuda;  // undefined unless an input is a CUDA tensor

  static RandomState now(bool with_cuda) {
    RandomState s;
    CpuGenerator& g = default_cpu_generator();
    {
      std::lock_guard<std::mutex> lock(g.mutex());
      s.cpu = g.get_state();
    }
    if (with_cuda) s.cuda = cuda::get_rng_state();
    return s;
  }
  void restore() const {
    CpuGenerator& g = default_cpu_generator();
    {
      std::lock_guard<std::mutex> lock(g.mutex());
      g.set_state(cpu);
    }
    if (cuda.defined()) cuda::set_rng_state(cuda);
  }
};

/// Sets the generators to `state` for its scope, then puts back the states it found. Inside a
/// compiled step's capture the two are regions, so that each replay sets the generators again
/// (Note [A checkpoint in a compiled step]).
class RandomStateGuard {
 public:
  explicit RandomStateGuard(const std::shared_ptr<const RandomState>& state) : state_(state) {
    if (!state_) return;
    previous_ = std::make_shared<RandomState>();
    const auto set = [state = state_, previous = previous_] {
      *previous = RandomState::now(state->cuda.defined());
      state->restore();
    };
    capture::Region region("checkpoint.set_rng_state", set);
    set();
  }
  ~RandomStateGuard() {
    if (!state_) return;
    const auto put_back = [previous = previous_] { previous->restore(); };
    capture::Region region("checkpoint.put_back_rng_state", put_back);
    put_back();
  }
  RandomStateGuard(const RandomStateGuard&) = delete;
  RandomStateGuard& operator=(const RandomStateGuard&) = delete;

 private:
  std::shared_ptr<const RandomState> state_;
  std::shared_ptr<RandomState> previous_;  // what the generators held before; null without a state
};

/// The generators' state now, kept where each replay of a compiled step's capture takes it
/// again (a region); null without preserve_rng_state.
std::shared_ptr<RandomState> random_state_now(bool preserve_rng_state, bool with_cuda) {
  if (!preserve_rng_state) return nullptr;
  auto state = std::make_shared<RandomState>();
  const auto take = [state, with_cuda] { *state = RandomState::now(with_cuda); };
  capture::Region region("checkpoint.get_rng_state", take);
  take();
  return state;
}

bool any_on_cuda(const TensorList& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.defined() && t.is_cuda(); });
}

/// One checkpointed region: what its recomputation needs, and what it recomputed.
class CheckpointFrame {
 public:
  CheckpointFrame(CheckpointFunction fn, const TensorList& inputs, bool preserve_rng_state)
      : fn_(std::move(fn)),
        inputs_(inputs),
        random_state_(random_state_now(preserve_rng_state, any_on_cuda(inputs))),
        cpu_autocast_(AutocastState::of(DeviceType::CPU)),
        cuda_autocast_(AutocastState::of(DeviceType::CUDA)) {
    // For a first-order recomputation, new leaves over the inputs' memory: it must not reach
    // back into the graph that made them (PyTorch detaches them the same way). The first run
    // and a recomputation under create_graph take the inputs themselves, so that their graphs
    // lead back to them.
    for (const Tensor& t : inputs) leaf_inputs_.push_back(t.defined() ? t.as_leaf(t.requires_grad()) : t);
  }

  /// pack: the saved tensor is dropped; its position in saving order is kept.
  std::any pack(const Tensor&) { return std::any(saved_count_++); }

  /// unpack: the tensor saved `index`-th, recomputing the region the first time (and again
  /// when a backward with create_graph follows one without: that needs the graph).
  Tensor unpack(const std::any& index) {
    // The engine runs a node's backward with grad mode on exactly when create_graph is set.
    const bool create_graph = is_grad_enabled();
    if (!recomputed_ || (create_graph && !recomputed_with_graph_)) recompute(create_graph);
    return (*recomputed_)[std::any_cast<std::size_t>(index)];
  }

  TensorList run_first_time(const TensorList& inputs) { return fn_(inputs); }

 private:
  /// See Note [Double backward through a checkpoint].
  void recompute(bool create_graph) {
    auto saved = std::make_shared<TensorList>();
    {
      autograd::SavedTensorsHooks keep;
      if (create_graph) {
        // The recomputation's own nodes keep their tensors (pack returns the tensor), so the
        // list is only filled here, through a pointer that does not outlive this scope.
        keep.pack = [list = saved.get()](const Tensor& t) { list->push_back(t); return std::any(t); };
        keep.unpack = [](const std::any& packed) { return std::any_cast<Tensor>(packed); };
      } else {
        // Detached: a recomputed tensor that kept its grad_fn would hold the recomputation's
        // graph, whose saved variables hold these hooks, which hold the list: a cycle.
        keep.pack = [saved](const Tensor& t) { saved->push_back(t.detach()); return std::any(saved->size() - 1); };
        keep.unpack = [saved](const std::any& index) { return (*saved)[std::any_cast<std::size_t>(index)]; };
      }
      keep.made_by_ops = true;
      autograd::SavedTensorsHooksGuard keep_all(std::move(keep));
      RandomStateGuard same_random(random_state_);
      amp::autocast cpu(DeviceType::CPU, cpu_autocast_.enabled, cpu_autocast_.dtype);
      amp::autocast cuda(DeviceType::CUDA, cuda_autocast_.enabled, cuda_autocast_.dtype);
      EnableGradGuard grad;
      (void)fn_(create_graph ? inputs_ : leaf_inputs_);
    }
    KILN_CHECK(saved->size() == saved_count_,
               "torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
               "recomputation.\nNumber of tensors saved during forward: ",
               saved_count_, "\nNumber of tensors saved during recomputation: ", saved->size());
    recomputed_ = std::move(saved);
    recomputed_with_graph_ = create_graph;
  }

  CheckpointFunction fn_;
  TensorList inputs_;       // as given: the recomputation under create_graph runs on them
  TensorList leaf_inputs_;  // new leaves over their memory: a first-order recomputation's
  std::shared_ptr<const RandomState> random_state_;  // none without preserve_rng_state
  AutocastState cpu_autocast_, cuda_autocast_;
  std::size_t saved_count_ = 0;
  std::shared_ptr<TensorList> recomputed_;  // null until backward first needs it
  bool recomputed_with_graph_ = false;
};

}  // namespace

TensorList checkpoint(const CheckpointFunction& fn, const TensorList& inputs, bool preserve_rng_state) {
  if (!is_grad_enabled()) return fn(inputs);
  auto frame = std::make_shared<CheckpointFrame>(fn, inputs, preserve_rng_state);
  autograd::SavedTensorsHooksGuard drop_saved({
      .pack = [frame](const Tensor& t) { return frame->pack(t); },
      .unpack = [frame](const std::any& index) { return frame->unpack(index); },
      .made_by_ops = true,
  });
  return frame->run_first_time(inputs);
}

Tensor checkpoint_sequential(Sequential& sequential, std::int64_t segments, const Tensor& input,
                             bool preserve_rng_state) {
  const auto modules = sequential.children();
  const auto count = static_cast<std::int64_t>(modules.size());
  KILN_CHECK_VALUE(segments >= 1 && segments <= count, "checkpoint_sequential: segments must be in [1, ", count,
                   "] for a Sequential of ", count, " modules, got ", segments);
  // Modules [start, end) as one function; each is called, so its hooks fire.
  const auto run = [modules](std::int64_t start, std::int64_t end) {
    return [modules, start, end](const Tensor& x) {
      Tensor h = x;
      for (std::int64_t j = start; j < end; ++j) h = (*modules[static_cast<std::size_t>(j)])(h);
      return h;
    };
  };
  const std::int64_t segment_size = count / segments;
  Tensor x = input;
  std::int64_t start = 0;
  for (; start < segment_size * (segments - 1); start += segment_size) {
    const auto segment = run(start, start + segment_size);
    x = checkpoint([segment](const TensorList& args) { return TensorList{segment(args[0])}; }, {x},
                   preserve_rng_state)[0];
  }
  return run(start, count)(x);
}

}  // namespace kiln::nn
