// compile/capture.cpp — the observer that records a step (see compile/capture.h and
// Note [Capturing a step]).
#include "compile/capture.h"

#include <cstdint>
#include <filesystem>

#include "compile/input_buffers.h"
#include "core/grad_mode.h"
#include "core/ops/copy.h"

namespace kiln::compiler {

namespace {

thread_local Capture* t_current = nullptr;

std::string site(std::source_location where) {
  return std::filesystem::path(where.file_name()).filename().string() + ":" + std::to_string(where.line());
}

/// "made by amax at model.cpp:12" (or "created by ..."): where a tensor came from.
std::string origin(const Tensor& t) {
  const std::string d = t.describe();
  return d.empty() ? std::string("a tensor") : d;
}

}  // namespace

Capture* Capture::current() { return t_current; }

Capture::~Capture() {
  if (installed_) {
    capture::set_observer(previous_);
    t_current = nullptr;
  }
}

std::vector<Tensor> Capture::run(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                                 const std::vector<Tensor>& inputs) {
  KILN_CHECK(!installed_ && t_current == nullptr, "compile: a step is already being captured on this thread");
  // What no buffer can stand in for runs as it is, on the caller's tensors.
  if (std::string why = inputs_not_replayable(inputs); !why.empty()) {
    fail(why);
    return fn(inputs);
  }
  const std::vector<Tensor> buffers = make_input_buffers(inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) caller_memory_.emplace(inputs[i].impl()->storage().get(), i);
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    written_.insert(buffers[i].impl()->storage().get());  // refilled at each replay: their values vary
    // One tensor passed twice has one buffer, and one gradient.
    if (buffers[i].requires_grad() && input_buffer_impls_.insert(buffers[i].impl()).second) {
      const Tensor& grad = inputs[i].grad();
      NoGradGuard no_grad;
      graph_.grad_inputs.push_back({i, grad.defined() ? ops::clone(grad) : Tensor()});
    }
  }
  graph_.inputs = buffers;
  hold_callers_grads(graph_, inputs);
  std::vector<std::uint32_t> versions;
  for (const Tensor& b : buffers) versions.push_back(b.impl()->storage()->version());
  previous_ = capture::set_observer(this);
  t_current = this;
  installed_ = true;
  std::vector<Tensor> outputs;
  try {
    outputs = fn(buffers);
  } catch (...) {
    capture::set_observer(previous_);
    t_current = nullptr;
    installed_ = false;
    throw;
  }
  capture::set_observer(previous_);
  t_current = nullptr;
  installed_ = false;
  // The step ran on the buffers; what it wrote in place of its inputs, eagerly it writes in
  // the caller's tensors (every in-place write bumps a storage's version).
  NoGradGuard no_grad;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].impl()->storage()->version() == versions[i]) continue;
    graph_.written_inputs.push_back(i);
    ops::copy_(inputs[i], buffers[i]);
  }
  // A gradient the step bound is the graph's from now on: the caller gets a copy of it.
  std::vector<Tensor> bound;
  for (const Graph::GradInput& in : graph_.grad_inputs) {
    const Tensor& grad = buffers[in.input].grad();
    bound.push_back(grad.defined() && !grad.is_same(in.held) ? ops::clone(grad) : Tensor());
  }
  hand_grads_to_callers(graph_, inputs, bound);
  return outputs;
}

Graph Capture::take_graph(const std::vector<Tensor>& outputs) {
  graph_.outputs.clear();
  for (const Tensor& t : outputs) graph_.outputs.push_back(t.defined() ? t.detach() : t);
  return std::move(graph_);
}

void Capture::fail(const std::string& why) {
  if (failure_.empty()) failure_ = why;
}

void Capture::check_not_caller_memory(const Tensor& t, const std::function<std::string()>& use) {
  if (!t.defined() || !failure_.empty()) return;
  const auto it = caller_memory_.find(t.impl()->storage().get());
  if (it == caller_memory_.end()) return;
  caller_memory_reached_ = t.impl()->storage();
  fail("input " + std::to_string(it->second) + " lies in memory the step also reaches directly (" + use() +
       "): a replay would compute on a copy of the argument, and the two would part, so this call computed on "
       "the copy too. Reach that memory one way only: as the argument, or through the module or closure");
}

void Capture::record(std::unique_ptr<KernelCall> call) {
  const std::vector<Tensor*> args = call->tensors();
  const std::vector<bool> writes = call->writes();
  for (std::size_t i = 0; i < args.size(); ++i) {
    check_not_caller_memory(*args[i], [&] { return call->name() + " uses " + origin(*args[i]); });
    if (!writes[i] || !args[i]->defined()) continue;
    const Storage* s = args[i]->impl()->storage().get();
    if (host_touched_.count(s)) {
      fail(call->name() + " writes a tensor that host code had already read or written (" + origin(*args[i]) +
           "): a replay would not redo the host's part");
    }
    written_.insert(s);
  }
  Node node;
  node.kind = Node::Kind::Kernel;
  node.call = std::move(call);
  graph_.nodes.push_back(std::move(node));
}

const BackendKernels* Capture::kernels(DeviceType type) {
  if (type == DeviceType::CPU) return &recording_kernels();
  if (type == DeviceType::CUDA && records_calls()) {
    fail("the step runs kernels on a CUDA device, which this capture does not record (CPU steps only)");
  }
  return nullptr;
}

void Capture::host_access(const Tensor& t, const char* how, std::source_location where) {
  if (kernel_depth_ > 0 || region_depth_ > 0 || !t.defined()) return;
  check_not_caller_memory(t, [&] { return std::string(how) + "() at " + site(where); });
  const Storage* s = t.impl()->storage().get();
  if (written_.count(s)) {
    fail(std::string(how) + "() at " + site(where) + " reads on the host a tensor this step computed (" +
         origin(t) + "): its value would be frozen at the first step's");
  } else {
    host_touched_.insert(s);
  }
}

void Capture::region_begin(const char* name, std::function<void()> replay,
                           std::initializer_list<const Tensor*> reads) {
  if (region_depth_++ > 0 || kernel_depth_ > 0) return;
  Node node;
  node.kind = Node::Kind::Region;
  node.region = name;
  node.replay = std::move(replay);
  for (const Tensor* t : reads) {
    check_not_caller_memory(*t, [&] { return std::string(name) + " reads it"; });
    node.reads.push_back(*t);
  }
  graph_.nodes.push_back(std::move(node));
}

void Capture::region_end() { --region_depth_; }

void Capture::grad_bound(const Tensor& leaf, const Tensor& grad) {
  if (region_depth_ > 0 || kernel_depth_ > 0) return;
  check_not_caller_memory(leaf, [] { return std::string("the backward binds its gradient"); });
  Node node;
  node.kind = Node::Kind::BindGrad;
  node.leaf = leaf;
  node.grad = grad;
  graph_.nodes.push_back(std::move(node));
}

void Capture::grad_unbound(const Tensor& leaf) {
  // Keyed as AccumulateGrad's condition on this leaf: a read after this adds none (Note [A
  // gradient bound or added to]), even when zero_grad runs as a region.
  state_set(leaf.impl());
}

void Capture::state_set(const void* key) { condition_keys_.insert(key); }

void Capture::storage_made(const std::shared_ptr<Storage>& storage) {
  if (region_depth_ == 0 && kernel_depth_ == 0) made_.push_back(storage);
}

void Capture::not_replayable(const std::string& what, std::source_location where) {
  if (region_depth_ > 0 || kernel_depth_ > 0) return;
  fail(what + " at " + site(where) + " cannot be replayed yet");
}

void Capture::depends_on(const void* key, std::function<bool()> holds) {
  // What an input buffer's .grad holds, each replay sets itself, after the guard asked whether
  // the caller's is empty (Note [A step's inputs]).
  if (region_depth_ > 0 || input_buffer_impls_.contains(key) || !condition_keys_.insert(key).second) return;
  conditions_.push_back(std::move(holds));
}

void Capture::scope_begin(const void* owner, const char* name, std::initializer_list<const Tensor*> args) {
  if (region_depth_ > 0 || kernel_depth_ > 0) {
    open_scopes_.push_back(SIZE_MAX);
    return;
  }
  Scope scope{owner, name, graph_.nodes.size(), graph_.nodes.size(), {}, {}};
  for (const Tensor* t : args) scope.args.push_back(*t);
  open_scopes_.push_back(scopes_.size());
  scopes_.push_back(std::move(scope));
}

void Capture::scope_end(std::initializer_list<const Tensor*> results) {
  if (open_scopes_.empty()) return;  // begun before this capture was installed
  const std::size_t index = open_scopes_.back();
  open_scopes_.pop_back();
  if (index == SIZE_MAX) return;
  Scope& scope = scopes_[index];
  scope.end = graph_.nodes.size();
  for (const Tensor* t : results) scope.results.push_back(*t);
}

}  // namespace kiln::compiler
