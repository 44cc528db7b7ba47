// compile/capture.h — recording one eager run of a step function into a Graph: while the
// function runs, raw ops find the capture's kernel table (core/capture_hooks.h), whose entries
// record each call and then make it, so the step computes exactly what it computes eagerly and
// leaves behind the list of kernels it ran.
//
//   compiler::Capture capture;
//   std::vector<Tensor> outputs = capture.run(step_function, {x, y});   // runs it, eagerly
//   if (capture.failure().empty()) compiler::Graph g = capture.take_graph(outputs);
//
// See Note [Capturing a step]. Read next: compile/graph.h, compile/compile.h.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "core/capture_hooks.h"

namespace kiln::compiler {

// Note [Capturing a step]
// ~~~~~~~~~~~~~~~~~~~~~~~
// A training step's work is kernel calls: every raw op validates, allocates, then calls one
// kernel through the kernel table (core/kernels.h), and autograd's backward formulas are ops
// too. So a step is captured by running it once with a kernel table whose entries record
// (kernel, arguments) before calling the real kernel. Replaying the list makes the same calls
// on the same memory: no validation, no autograd graph, no allocation (Note [One arena per
// step]). What is not a kernel call must be made explicit, and Kiln's layers say so through
// the hooks in core/capture_hooks.h:
//  - Regions. Code whose kernels take host numbers that change from step to step (an
//    optimizer's step count and scheduled learning rate, a GradScaler's inverse scale) or that
//    decides on the host (GradScaler skipping a step on inf, a check that an index is in
//    range) runs as it is at each replay: optimizer.step, zero_grad, a learning-rate
//    schedule's step, GradScaler's scale, unscale_, step and update, the index checks,
//    manual_seed and a module's train()/eval(), each record one Region node and none of their
//    kernels.
//  - Gradients. AccumulateGrad binds a leaf's first gradient to its .grad; zero_grad (a
//    region) unbinds it; a BindGrad node binds it again at each replay. What the .grad held
//    is a condition (Note [A gradient bound or added to] in autograd/accumulate_grad.cpp).
//  - Everything else is refused. Host code that reads a tensor a kernel of this step wrote
//    (Tensor::item, data_ptr outside a kernel: a loss printed inside the step, a value that
//    decides a shape), or writes one that a kernel later reads, would be computed once and
//    frozen; so would ops on CUDA tensors, which this capture does not record, and
//    get_rng_state and set_rng_state. The capture then fails with the reason and its source
//    line, and the step stays eager.
//  - Modules. A module's training mode and its hooks decide which kernels its call makes, so
//    reading them makes the graph conditional on them (Note [What a graph assumed of its
//    modules]). State a graph holds that changes outside the step (Module::to() replacing a
//    parameter, a hook added to or removed from a parameter's gradient) makes it stale: the
//    next call captures again (capture::held_state_changed).
// Numbers the step computes on the host (x * 0.5, a dropout probability) become constants of
// the graph, as in tinygrad's TinyJit, and branches on host values (a counter deciding every
// fourth call to step the optimizer) are taken once; what changes must live in tensors or in a
// region, or outside the compiled function.
// Tensors from outside the step are read where they lie (Note [Tensors a step reads from
// outside], compile/outside_reads.h).
// The step's random kernels are called again at every replay, so they draw fresh numbers from
// the generator, in eager order. A compiled function the step calls runs its body while the
// step is captured, so its ops are the step's (torch.compile inlines it the same way).

// Note [What a graph assumed of its modules]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Dropout in training mode records a random mask and a multiply, in eval mode nothing;
// BatchNorm in training mode normalises with the batch's statistics and updates its running
// ones, in eval mode it reads them. A graph captured in one mode and replayed after
// model.eval() would go on dropping units and moving the running statistics, silently. A
// forward hook registered after the capture would silently never run. So what a module's call
// reads of the module while a capture records (Module::is_training(), and has_hooks() finding
// none) becomes a condition of the graph: the state, held weakly, and the value read. A
// compiled step replays a graph only while each of its conditions holds; otherwise the call is
// a new kind and captures again: a loop that alternates train() and eval() keeps one graph for
// each (torch.compile guards on `self.training` in the same way), a hooked call runs eagerly
// (Note [Capturing a step]) and the first graph replays again once the hook is removed. A
// module destroyed since fails its conditions. Reads inside a region are not conditions: a
// region runs its own code at each replay. Nor is a mode the step set itself before reading
// it (model.eval() inside the step: capture::state_set): that read sees the step's own doing,
// which the train() region does again at each replay, not the caller's state.

// Note [Layer scopes]
// ~~~~~~~~~~~~~~~~~~~
// A layer may mark its call (capture::Scope, core/capture_hooks.h), and the capture notes, for
// each marked call at the top level, which of the recorded nodes it made and the tensors it
// took and returned: Capture::scopes(), the counterpart of the module scopes PyTorch's tracer
// keeps. A replay reads none of it; a reader of the recording that knows a layer as a whole
// (the ONNX export writes an nn::LSTM as one ONNX LSTM node) can take the call for its nodes.
// Scopes index the nodes as captured, before any pass rewrites them.

/// The test that host state a recording depends on still has the value it had.
using Condition = std::function<bool()>;

/// One marked call of a layer: nodes [begin, end) of the capture are its work.
struct Scope {
  const void* owner = nullptr;
  std::string name;
  std::size_t begin = 0, end = 0;
  std::vector<Tensor> args, results;  // results is empty when the call threw
};

/// The kernel table whose entries record each call made at the top level (not from inside
/// another kernel) and then make it (compile/recording_table.cpp).
const BackendKernels& recording_kernels();

class Capture final : public capture::Observer {
 public:
  Capture() = default;
  ~Capture() override;
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  /// Runs `fn` on copies of `inputs` (the graph's own input buffers) while recording, copies
  /// the buffers it wrote in place back into `inputs`, and returns what it returned. The run
  /// is eager: its results are the step's real results.
  std::vector<Tensor> run(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs);
  /// Why the step cannot be replayed ("" when it can), naming the op and the source line.
  const std::string& failure() const { return failure_; }
  /// The recorded graph, returning `outputs` (what run() returned).
  Graph take_graph(const std::vector<Tensor>& outputs);

  // --- the recording table's side (compile/recording_table.cpp) ------------------------------
  /// The capture recording on this thread, if any.
  static Capture* current();
  /// True when a call made now is recorded: at the top level, outside any region.
  bool records_calls() const { return kernel_depth_ == 0 && region_depth_ == 0 && failure_.empty(); }
  void record(std::unique_ptr<KernelCall> call);
  /// Brackets a kernel's execution (nested kernels and their data accesses are its own).
  void enter_kernel() { ++kernel_depth_; }
  void leave_kernel() { --kernel_depth_; }

  // --- capture::Observer ------------------------------------------------------------------------
  const BackendKernels* kernels(DeviceType type) override;
  void host_access(const Tensor& t, const char* how, std::source_location where) override;
  void region_begin(const char* name, std::function<void()> replay,
                    std::initializer_list<const Tensor*> reads) override;
  void region_end() override;
  void grad_bound(const Tensor& leaf, const Tensor& grad) override;
  void grad_unbound(const Tensor& leaf) override;
  void state_set(const void* key) override;
  void storage_made(const std::shared_ptr<Storage>& storage) override;
  void not_replayable(const std::string& what, std::source_location where) override;
  void scope_begin(const void* owner, const char* name, std::initializer_list<const Tensor*> args) override;
  void scope_end(std::initializer_list<const Tensor*> results) override;
  void depends_on(const void* key, std::function<bool()> holds) override;
  /// What the recording depends on, each once (Note [What a graph assumed of its modules]).
  const std::vector<Condition>& conditions() const { return conditions_; }
  /// The marked layer calls made at the top level, outermost first where they nest.
  const std::vector<Scope>& scopes() const { return scopes_; }
  /// The argument's own memory that the step also reached directly, when that failed the
  /// capture (Note [A step's inputs]); empty otherwise.
  const std::weak_ptr<Storage>& caller_memory_reached() const { return caller_memory_reached_; }
  /// The memory the step's ops allocated at the top level, outside regions, held weakly.
  const std::vector<std::weak_ptr<Storage>>& made() const { return made_; }

 private:
  void fail(const std::string& why);
  /// Fails the capture when `t` lies in the memory of one of the caller's arguments, which the
  /// step should reach only through its buffer (Note [A step's inputs]); `use()` names the use.
  void check_not_caller_memory(const Tensor& t, const std::function<std::string()>& use);

  Graph graph_;
  std::string failure_;
  int kernel_depth_ = 0, region_depth_ = 0;
  std::set<const Storage*> written_;      // storages a recorded kernel wrote (or the inputs)
  std::set<const Storage*> host_touched_;  // storages host code touched before any kernel wrote them
  std::vector<Scope> scopes_;
  std::vector<Condition> conditions_;
  std::set<const void*> condition_keys_;
  std::set<const void*> input_buffer_impls_;  // the buffers of inputs that require grad
  std::map<const Storage*, std::size_t> caller_memory_;  // the arguments' own storages, by first index
  std::weak_ptr<Storage> caller_memory_reached_;
  std::vector<std::weak_ptr<Storage>> made_;
  std::vector<std::size_t> open_scopes_;  // indices into scopes_ (SIZE_MAX: one not noted)
  capture::Observer* previous_ = nullptr;
  bool installed_ = false;
};

}  // namespace kiln::compiler
