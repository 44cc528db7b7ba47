// compile/compile.cpp — guards, the graph cache, and when a compiled step captures, replays
// or runs eagerly (see compile/compile.h).
#include "compile/compile.h"

#include <algorithm>
#include <deque>
#include <sstream>
#include <utility>

#include "autograd/anomaly_mode.h"
#include "autograd/autocast.h"
#include "autograd/saved_tensors_hooks.h"
#include "compile/capture.h"
#include "compile/outside_reads.h"
#include "compile/passes.h"
#include "core/backends.h"
#include "core/grad_mode.h"
#include "core/threads.h"
#include "core/warning.h"

namespace kiln::compiler {

Guard Guard::of(const std::vector<Tensor>& inputs) {
  Guard g;
  for (const Tensor& t : inputs) {
    KILN_CHECK_VALUE(t.defined(), "compiled step: an input tensor is undefined");
    g.inputs.push_back({std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()),
                        std::vector<std::int64_t>(t.strides().begin(), t.strides().end()), t.dtype(), t.device(),
                        t.requires_grad(), !t.requires_grad() || t.is_leaf(),
                        t.requires_grad() && t.is_leaf() && has_grad_hooks(t),
                        t.requires_grad() && t.is_leaf() && t.grad().defined(), !parameter_name(t).empty()});
  }
  const std::vector<SharedMemory> shared = shared_memory(inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) g.inputs[i].shared = shared[i];
  g.grad_enabled = is_grad_enabled();
  g.autocast_cpu = amp::is_autocast_enabled(DeviceType::CPU);
  g.autocast_cuda = amp::is_autocast_enabled(DeviceType::CUDA);
  g.autocast_cpu_dtype = amp::get_autocast_dtype(DeviceType::CPU);
  g.autocast_cuda_dtype = amp::get_autocast_dtype(DeviceType::CUDA);
  g.threads = get_num_threads();
  g.default_dtype = kiln::default_dtype();
  int bit = 0;
  for (const DeviceType type : {DeviceType::CPU, DeviceType::CUDA}) {
    for (int f = 0; f < static_cast<int>(backends::OpFamily::kCount); ++f, ++bit) {
      if (backends::op_kernels_enabled(type, static_cast<backends::OpFamily>(f))) g.library_routes |= 1u << bit;
    }
  }
  g.anomaly_detection = autograd::is_anomaly_enabled();
  g.saved_tensors_hooks = autograd::current_saved_tensors_hooks() != nullptr;
  g.requires_grad_changes = TensorImpl::requires_grad_changes();
  g.held_state_changes = capture::held_state_changes();
  return g;
}

std::string Guard::describe() const {
  std::ostringstream os;
  os << "inputs ";
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? ", " : "") << dtype_name(inputs[i].dtype) << IntArrayRef(inputs[i].sizes);
    if (!inputs[i].device.is_cpu()) os << " on " << inputs[i].device.str();
    if (inputs[i].parameter) os << " (a parameter)";
    if (const SharedMemory& m = inputs[i].shared; m.with >= 0) {
      os << (m.same_tensor ? " (input " : " (over input ") << m.with << (m.same_tensor ? " again)" : "'s memory)");
    }
  }
  os << "; grad " << (grad_enabled ? "on" : "off") << "; autocast ";
  if (autocast_cpu) os << "cpu " << autocast_cpu_dtype << " ";
  if (autocast_cuda) os << "cuda " << autocast_cuda_dtype << " ";
  if (!autocast_cpu && !autocast_cuda) os << "off ";
  os << "; " << threads << " threads";
  if (default_dtype != kFloat32) os << "; default dtype " << dtype_name(default_dtype);
  if (anomaly_detection) os << "; anomaly detection on";
  if (saved_tensors_hooks) os << "; saved-tensors hooks";
  return os.str();
}

struct CompiledStep::State {
  struct Entry {
    Guard guard;
    std::vector<Condition> conditions;  // module state the capture read: modes, no hooks
    std::optional<Graph> graph;
    std::optional<OutsideReads> outside;  // the tensors it shares with the world outside
    std::string failure;  // why this kind of call runs eagerly
    /// Where the failure was an argument over memory the step reaches directly: that memory.
    /// Only calls passing it again fail so; another call of the kind captures anew.
    std::optional<std::weak_ptr<Storage>> failed_on_memory;
    bool matches(const Guard& now, const std::vector<Tensor>& inputs) const {
      if (guard != now || !std::ranges::all_of(conditions, [](const Condition& holds) { return holds(); })) {
        return false;
      }
      if (!failed_on_memory) return true;
      const std::shared_ptr<Storage> memory = failed_on_memory->lock();
      return memory && std::ranges::any_of(inputs, [&](const Tensor& t) { return t.impl()->storage() == memory; });
    }
    /// Whether the graph reads from outside (a parameter, a closure's tensor) memory one of
    /// `inputs` lies in: replayed, it would read that memory where it lies and the argument in
    /// a copy (Note [A step's inputs]), so the call is of another kind, whose capture fails.
    bool reads_memory_of(const std::vector<Tensor>& inputs) const {
      return outside && std::ranges::any_of(inputs, [&](const Tensor& t) {
               return outside->reads(t.impl()->storage().get());
             });
    }
  };
  Body body;
  CompileOptions options;
  std::vector<Pass> passes;
  std::deque<Entry> entries;  // a deque: last_graph points into it
  CompileStats stats;
  const Graph* last_graph = nullptr;
  bool last_replayed = false;
  std::string eager_reason;
  bool warned_full = false;
  bool warned_argument_read_directly = false;
  bool warned_let_go = false;

  /// Runs the step's body as it is, on the caller's tensors, for `reason`.
  std::vector<Tensor> run_eagerly(const std::vector<Tensor>& inputs, std::string reason) {
    eager_reason = std::move(reason);
    ++stats.eager_calls;
    return body(inputs);
  }
};

CompiledStep::CompiledStep(Body body, CompileOptions options) : state_(std::make_unique<State>()) {
  state_->body = std::move(body);
  state_->passes = selected_passes(options.passes);
  state_->options = std::move(options);
}

CompiledStep::~CompiledStep() = default;
CompiledStep::CompiledStep(CompiledStep&&) noexcept = default;
CompiledStep& CompiledStep::operator=(CompiledStep&&) noexcept = default;

std::vector<Tensor> CompiledStep::operator()(const std::vector<Tensor>& inputs) {
  State& s = *state_;
  // Called while another step is being captured, this step is part of that one: it runs its
  // body, and the ops land in the other's graph (torch.compile inlines a compiled function
  // called from another). A replay of its own there would record nothing.
  if (Capture::current() != nullptr) return s.body(inputs);
  const Guard guard = Guard::of(inputs);
  s.last_replayed = false;
  // Graphs captured before a leaf's requires_grad changed, before state they hold changed
  // (capture::held_state_changed), or holding a tensor from outside that the caller let go
  // (Note [Tensors a step reads from outside]) can never match again.
  if (std::erase_if(s.entries, [&](const State::Entry& e) {
        if (e.guard.requires_grad_changes != guard.requires_grad_changes ||
            e.guard.held_state_changes != guard.held_state_changes ||
            (e.failed_on_memory && e.failed_on_memory->expired())) {
          return true;
        }
        if (!e.outside) return false;
        const std::string let_go = e.outside->let_go();
        if (let_go.empty()) return false;
        if (!s.warned_let_go) {
          warn("compiled step: a tensor it reads from outside (" + let_go + ") is no longer held by anything "
               "but its graph, so the step must read another now: it captures again. A tensor that changes "
               "between calls should be an argument of the step, or take its new values through copy_()");
          s.warned_let_go = true;
        }
        return true;
      }) > 0) {
    s.last_graph = nullptr;
  }
  bool argument_read_directly = false;
  for (State::Entry& e : s.entries) {
    if (!e.matches(guard, inputs)) continue;
    if (e.reads_memory_of(inputs)) {
      argument_read_directly = true;
      continue;
    }
    if (e.graph) {
      s.last_graph = &*e.graph;
      s.last_replayed = true;
      s.eager_reason.clear();
      ++s.stats.replays;
      return e.graph->run(inputs);
    }
    return s.run_eagerly(inputs, e.failure);
  }
  if (s.entries.size() >= s.options.cache_limit) {
    const std::string reason = "more than " + std::to_string(s.options.cache_limit) + " kinds of call were compiled";
    if (!std::exchange(s.warned_full, true)) {
      warn("compiled step: " + reason + "; this one (" + guard.describe() + ") and any further kind run eagerly");
    }
    return s.run_eagerly(inputs, reason);
  }
  if (argument_read_directly) {
    // Known before running it: a capture would compute on a copy of memory the step reaches
    // directly, so the call runs eagerly on the caller's tensors (each such call finds it so).
    const std::string reason = "an input lies in memory the step's graph reads directly (a parameter, a tensor its "
                               "closure holds): a replay would compute on a copy of the argument, and the two would "
                               "part. Reach that memory one way only: as the argument, or through the module or "
                               "closure";
    if (!std::exchange(s.warned_argument_read_directly, true)) warn("compiled step runs eagerly: " + reason);
    return s.run_eagerly(inputs, reason);
  }
  std::vector<Tensor> results;
  std::vector<std::weak_ptr<Storage>> made;
  {
    Capture capture;
    std::vector<Tensor> outputs = capture.run(s.body, inputs);
    ++s.stats.captures;
    if (!capture.failure().empty()) {
      s.eager_reason = capture.failure();
      warn("compiled step runs eagerly: " + capture.failure());
      s.entries.push_back({guard, capture.conditions(), std::nullopt, std::nullopt, capture.failure()});
      if (const std::weak_ptr<Storage>& memory = capture.caller_memory_reached(); !memory.expired()) {
        s.entries.back().failed_on_memory = memory;
      }
      return outputs;
    }
    made = capture.made();
    Graph graph = capture.take_graph(outputs);
    run_passes(graph, s.passes);
    s.entries.push_back({guard, capture.conditions(), std::move(graph), std::nullopt, ""});
    s.last_graph = &*s.entries.back().graph;
    s.eager_reason.clear();
    results = s.last_graph->capture_results(outputs);
  }
  // The eager results, their autograd graph and the recording are gone: what holds the
  // graph's tensors now is what holds them between steps.
  State::Entry& entry = s.entries.back();
  entry.outside.emplace(*s.last_graph, made);
  if (const std::string& kept = entry.outside->made_and_kept(); !kept.empty()) {
    entry.failure = "the step made a tensor (" + kept + ") that something outside it still holds after the "
                    "call, not as a result: a replay would not hand out a new one. Return it from the step "
                    "(and pass it back in as an argument)";
    entry.graph.reset();
    entry.outside.reset();
    s.last_graph = nullptr;
    s.eager_reason = entry.failure;
    warn("compiled step runs eagerly: " + entry.failure);
  }
  return results;
}

const Graph& CompiledStep::graph() const {
  KILN_CHECK(state_->last_graph != nullptr, "compiled step: no graph yet (call the step first; a step that runs "
             "eagerly has none: ", state_->eager_reason.empty() ? "not called yet" : state_->eager_reason, ")");
  return *state_->last_graph;
}

const CompileStats& CompiledStep::stats() const { return state_->stats; }
bool CompiledStep::last_call_replayed() const { return state_->last_replayed; }
const std::string& CompiledStep::eager_reason() const { return state_->eager_reason; }

void CompiledStep::reset() {
  state_->entries.clear();
  state_->last_graph = nullptr;
  state_->last_replayed = false;
  state_->eager_reason.clear();
}

}  // namespace kiln::compiler
