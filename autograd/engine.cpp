// autograd/engine.cpp — the backward pass (see Note [Engine ordering] in autograd/engine.h).
#include "autograd/engine.h"

#include <cmath>
#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "autograd/accumulate_grad.h"
#include "autograd/anomaly_mode.h"
#include "autograd/functions/reduce.h"
#include "autograd/node.h"
#include "core/autograd_meta.h"
#include "core/creation.h"
#include "core/grad_mode.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/profiler_hooks.h"

namespace kiln::autograd {

namespace {

/// One backward pass in flight: the state the graph walk keeps, whoever asked for it.
struct GraphTask {
  bool keep_graph = false;
  bool create_graph = false;
  std::vector<std::shared_ptr<Node>> nodes;  // keeps every reachable node alive meanwhile
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, TensorList> buffers;  // gradients waiting for each node

  GraphTask(std::optional<bool> retain_graph, bool create_graph)
      : keep_graph(retain_graph.value_or(create_graph)), create_graph(create_graph) {}

  /// The node's input buffer, one slot per output of the node's forward.
  TensorList& buffer_of(Node* n) {
    TensorList& b = buffers[n];
    if (b.size() < n->num_outputs()) b.resize(n->num_outputs());
    return b;
  }
};

/// Where a walk starts: the outputs' grad_fn nodes and the gradients they are seeded with.
struct Roots {
  std::vector<std::shared_ptr<Node>> nodes;
  std::vector<std::pair<Edge, Tensor>> seeds;
};

/// What backward() and grad() do differently; the walk itself (walk_graph) is shared.
struct WalkPolicy {
  /// Whether gradients flow into this node at all (grad() skips nodes that lead to no input).
  std::function<bool(Node*)> wants;
  /// Sees the node's gradients once its pre-hooks ran; returns whether the node runs and
  /// the walk goes on past it.
  std::function<bool(Node*, const TensorList&)> reached;
};

/// Sums gradients for the same tensor from several consumers.
void accumulate_into(TensorList& buffer, std::uint32_t slot, Tensor grad, bool create_graph) {
  if (!buffer[slot].defined()) {
    buffer[slot] = std::move(grad);
  } else if (create_graph) {
    buffer[slot] = buffer[slot] + grad;
  } else {
    buffer[slot] = ops::binary(BinaryOp::Add, buffer[slot], grad);
  }
}

bool can_sum_to(IntArrayRef from, IntArrayRef to) {
  if (to.size() > from.size()) return false;
  const std::size_t lead = from.size() - to.size();
  for (std::size_t i = 0; i < to.size(); ++i) {
    if (to[i] != from[lead + i] && to[i] != 1) return false;
  }
  return true;
}

/// Makes a gradient fit the tensor it is for: same shape (a broadcast gradient is summed
/// down), dtype and device. Anything else is a bug in a backward formula.
Tensor validate(const Node& producer, std::size_t index, const Edge& edge, Tensor grad) {
  const OutputMeta& meta = edge.function->output_meta()[edge.input_nr];
  if (IntArrayRef(meta.sizes) != grad.sizes()) {
    KILN_CHECK(can_sum_to(grad.sizes(), meta.sizes), "Function ", producer.name(),
               " returned an invalid gradient at index ", index, " - got ", grad.sizes(),
               " but expected shape compatible with ", IntArrayRef(meta.sizes));
    grad = sum_to(grad, meta.sizes);
  }
  if (grad.dtype() != meta.dtype || grad.device() != meta.device) {
    grad = grad.to(meta.device, meta.dtype);
  }
  return grad;
}

bool has_nan(const Tensor& t) {
  if (!t.is_floating_point() || t.is_meta()) return false;
  NoGradGuard no_grad;
  return ops::sum(ops::binary(BinaryOp::Ne, t, t), {}, false).item<std::int64_t>() > 0;
}

/// Checks each output against its gradient (ones when none was given for a scalar output)
/// and pairs them up as the walk's starting points.
Roots seed_roots(const TensorList& outputs, const TensorList& grad_outputs) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
               "grad requires one gradient per output (got ", grad_outputs.size(), " for ",
               outputs.size(), " outputs)");
  Roots roots;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    KILN_CHECK(out.defined() && out.requires_grad(), "element ", i,
               " of tensors does not require grad and does not have a grad_fn");
    Tensor seed = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!seed.defined()) {
      KILN_CHECK(out.numel() == 1, "grad can be implicitly created only for scalar outputs");
      seed = ones_like(out);
    } else {
      KILN_CHECK(seed.sizes() == out.sizes(), "Mismatch in shape: grad_output[", i,
                 "] has a shape of ", seed.sizes(), " and output[", i, "] has a shape of ",
                 out.sizes(), ".");
    }
    Edge edge = gradient_edge(out);
    roots.nodes.push_back(edge.function);
    roots.seeds.emplace_back(std::move(edge), std::move(seed));
  }
  return roots;
}

/// Counts the edges into every node reachable from the roots (iteratively).
void count_dependencies(GraphTask& task, const std::vector<std::shared_ptr<Node>>& roots) {
  std::unordered_set<Node*> seen;
  std::vector<std::shared_ptr<Node>> stack;
  for (const auto& r : roots) {
    if (seen.insert(r.get()).second) {
      stack.push_back(r);
      task.nodes.push_back(r);
    }
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      ++task.dependencies[e.function.get()];
      if (seen.insert(e.function.get()).second) {
        stack.push_back(e.function);
        task.nodes.push_back(e.function);
      }
    }
  }
}

/// The walk both backward() and grad() make (Note [Engine ordering]): dependency counts,
/// then a ready queue, most recently created node first; each node's gradients are summed
/// in its buffer, its pre-hooks run, the policy sees them, the node runs, and what it
/// returns is checked and sent along its edges.
void walk_graph(GraphTask& task, Roots roots, const WalkPolicy& policy) {
  count_dependencies(task, roots.nodes);
  for (auto& [edge, seed] : roots.seeds) {
    accumulate_into(task.buffer_of(edge.function.get()), edge.input_nr, std::move(seed),
                    task.create_graph);
  }

  using Entry = std::pair<std::uint64_t, Node*>;
  std::priority_queue<Entry> ready;
  std::unordered_set<Node*> queued;
  for (const auto& r : roots.nodes) {
    if (task.dependencies[r.get()] == 0 && queued.insert(r.get()).second) {
      ready.emplace(r->sequence_nr(), r.get());
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top().second;
    ready.pop();
    TensorList buffer = std::move(task.buffer_of(node));
    task.buffers.erase(node);
    if (!policy.wants(node)) continue;

    {
      GradModeGuard mode(task.create_graph);
      for (std::uint32_t slot = 0; slot < buffer.size(); ++slot) {
        if (buffer[slot].defined() && node->has_pre_hooks()) node->run_pre_hooks(slot, buffer[slot]);
      }
    }
    if (!policy.reached(node, buffer)) continue;

    const bool any_defined = std::any_of(buffer.begin(), buffer.end(),
                                         [](const Tensor& t) { return t.defined(); });
    TensorList results;
    if (any_defined) {
      GradModeGuard mode(task.create_graph);
      profiler::NodeScope profiled(node->name(), node->sequence_nr());
      results = node->apply(std::move(buffer));
    }
    results.resize(node->next_edges().size());
    if (is_anomaly_enabled()) {
      for (std::size_t i = 0; i < results.size(); ++i) {
        KILN_CHECK(!(results[i].defined() && has_nan(results[i])), "Function '", node->name(),
                   "' returned nan values in its ", i, "th output.\n", node->creation_trace());
      }
    }
    if (!task.keep_graph) node->release_variables();

    const auto& edges = node->next_edges();
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Node* next = e.function.get();
      if (!policy.wants(next)) continue;
      if (results[i].defined()) {
        GradModeGuard mode(task.create_graph);
        accumulate_into(task.buffer_of(next), e.input_nr, validate(*node, i, e, std::move(results[i])),
                        task.create_graph);
      }
      if (--task.dependencies[next] == 0 && queued.insert(next).second) {
        ready.emplace(next->sequence_nr(), next);
      }
    }
  }
}

// ---- grad(): capture the inputs' gradients instead of accumulating them -------------------

/// For each node that receives an input's gradient: (slot in the node's buffer, index of the
/// input in grad()'s argument list).
using Captures = std::unordered_map<Node*, std::vector<std::pair<std::uint32_t, std::size_t>>>;

/// Marks the nodes that lie on a path from a root to a captured input, with an iterative
/// post-order walk (a node is needed if it is captured or a child is needed). The others
/// would only compute gradients nobody asked for.
std::unordered_set<Node*> nodes_leading_to(const Captures& captures,
                                           const std::vector<std::shared_ptr<Node>>& roots) {
  std::unordered_set<Node*> needed;
  std::unordered_set<Node*> done;
  std::vector<std::pair<Node*, std::size_t>> stack;
  for (const auto& r : roots) {
    if (done.count(r.get())) continue;
    stack.emplace_back(r.get(), 0);
    while (!stack.empty()) {
      auto& [node, child] = stack.back();
      const auto& edges = node->next_edges();
      if (child < edges.size()) {
        Node* next = edges[child++].function.get();
        if (next != nullptr && !done.count(next)) {
          done.insert(next);
          stack.emplace_back(next, 0);
        }
        continue;
      }
      bool is_needed = captures.count(node) > 0;
      for (const Edge& e : edges) is_needed = is_needed || (e.is_valid() && needed.count(e.function.get()));
      if (is_needed) needed.insert(node);
      done.insert(node);
      stack.pop_back();
    }
  }
  return needed;
}

/// A captured leaf's own tensor hooks still see its gradient (they would in backward()).
Tensor run_leaf_hooks(const AccumulateGrad& leaf_node, Tensor grad) {
  if (AutogradMeta* meta = leaf_node.variable().impl()->autograd_meta_if_exists()) {
    for (const auto& [id, hook] : meta->hooks) {
      Tensor replaced = hook(grad);
      if (replaced.defined()) grad = std::move(replaced);
    }
  }
  return grad;
}

}  // namespace

void backward(const TensorList& outputs, const TensorList& grad_outputs,
              std::optional<bool> retain_graph, bool create_graph) {
  GraphTask task(retain_graph, create_graph);
  // Every reachable node runs; a leaf's AccumulateGrad node adds its gradient into .grad.
  const WalkPolicy accumulate{
      .wants = [](Node*) { return true; },
      .reached = [](Node*, const TensorList&) { return true; },
  };
  walk_graph(task, seed_roots(outputs, grad_outputs), accumulate);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  GraphTask task(retain_graph, create_graph);
  Captures captures;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "One of the differentiated "
               "Tensors does not require grad (input ", i, ", ", inputs[i].describe(), ")");
    const Edge e = gradient_edge(inputs[i]);
    captures[e.function.get()].emplace_back(e.input_nr, i);
    task.nodes.push_back(e.function);
  }
  Roots roots = seed_roots(outputs, grad_outputs);
  const std::unordered_set<Node*> needed = nodes_leading_to(captures, roots.nodes);

  TensorList captured(inputs.size());
  // Only nodes on a path to an input run; an input's gradient is copied out as it reaches
  // the input's node, and the walk stops at leaves, so no .grad is ever written.
  const WalkPolicy capture{
      .wants = [&](Node* node) { return needed.count(node) > 0; },
      .reached =
          [&](Node* node, const TensorList& buffer) {
            const auto* leaf_node = dynamic_cast<const AccumulateGrad*>(node);
            if (auto it = captures.find(node); it != captures.end()) {
              for (const auto& [slot, index] : it->second) {
                Tensor g = buffer[slot];
                if (g.defined() && leaf_node != nullptr) g = run_leaf_hooks(*leaf_node, std::move(g));
                captured[index] = std::move(g);
              }
            }
            return leaf_node == nullptr;
          },
  };
  walk_graph(task, std::move(roots), capture);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(allow_unused || captured[i].defined(),
               "One of the differentiated Tensors appears to not have been used in the graph. "
               "Set allow_unused=True if this is the desired behavior.");
  }
  return captured;
}

}  // namespace kiln::autograd

namespace kiln {

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace kiln
