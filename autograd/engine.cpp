// autograd/engine.cpp — the backward pass (see Note [Engine ordering] in autograd/engine.h).
#include "autograd/engine.h"

#include <cmath>
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

struct Task {
  bool keep_graph = false;
  bool create_graph = false;
  bool capture_mode = false;  // autograd::grad(): capture gradients, do not accumulate
  std::vector<std::shared_ptr<Node>> nodes;  // keeps every reachable node alive meanwhile
  std::unordered_map<Node*, int> dependencies;
  std::unordered_map<Node*, TensorList> buffers;
  std::unordered_map<Node*, std::vector<std::pair<std::uint32_t, std::size_t>>> captures;
  std::unordered_set<Node*> needed;  // capture mode: nodes on a path to a captured input
  TensorList captured;
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

/// Counts the edges into every node reachable from the roots (iteratively).
void count_dependencies(Task& task, const std::vector<std::shared_ptr<Node>>& roots) {
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

/// Capture mode: marks the nodes that lie on a path from a root to a captured input, with an
/// iterative post-order walk (a node is needed if it is captured or a child is needed).
void mark_needed(Task& task, const std::vector<std::shared_ptr<Node>>& roots) {
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
      bool needed = task.captures.count(node) > 0;
      for (const Edge& e : edges) needed = needed || (e.is_valid() && task.needed.count(e.function.get()));
      if (needed) task.needed.insert(node);
      done.insert(node);
      stack.pop_back();
    }
  }
}

void run(Task& task, const TensorList& outputs, const TensorList& grad_outputs) {
  KILN_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(),
               "grad requires one gradient per output (got ", grad_outputs.size(), " for ",
               outputs.size(), " outputs)");
  std::vector<std::shared_ptr<Node>> roots;
  std::vector<std::pair<Edge, Tensor>> seeds;
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
    roots.push_back(edge.function);
    seeds.emplace_back(std::move(edge), std::move(seed));
  }
  count_dependencies(task, roots);
  if (task.capture_mode) mark_needed(task, roots);

  auto buffer_of = [&](Node* n) -> TensorList& {
    TensorList& b = task.buffers[n];
    if (b.size() < n->num_outputs()) b.resize(n->num_outputs());
    return b;
  };
  for (auto& [edge, seed] : seeds) {
    accumulate_into(buffer_of(edge.function.get()), edge.input_nr, std::move(seed), task.create_graph);
  }

  using Entry = std::pair<std::uint64_t, Node*>;
  std::priority_queue<Entry> ready;
  std::unordered_set<Node*> queued;
  for (const auto& r : roots) {
    if (task.dependencies[r.get()] == 0 && queued.insert(r.get()).second) {
      ready.emplace(r->sequence_nr(), r.get());
    }
  }

  while (!ready.empty()) {
    Node* node = ready.top().second;
    ready.pop();
    TensorList buffer = std::move(buffer_of(node));
    task.buffers.erase(node);
    if (task.capture_mode && !task.needed.count(node)) continue;

    const bool is_leaf_node = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    {
      GradModeGuard mode(task.create_graph);
      for (std::uint32_t slot = 0; slot < buffer.size(); ++slot) {
        if (buffer[slot].defined() && node->has_pre_hooks()) node->run_pre_hooks(slot, buffer[slot]);
      }
    }
    if (auto it = task.captures.find(node); it != task.captures.end()) {
      for (const auto& [slot, index] : it->second) {
        Tensor g = buffer[slot];
        if (g.defined() && is_leaf_node) {
          // A captured leaf's own hooks still see its gradient (they would in backward()).
          const Tensor& leaf = static_cast<AccumulateGrad*>(node)->variable();
          if (AutogradMeta* meta = leaf.impl()->autograd_meta_if_exists()) {
            for (const auto& [id, hook] : meta->hooks) {
              Tensor replaced = hook(g);
              if (replaced.defined()) g = std::move(replaced);
            }
          }
        }
        task.captured[index] = g;
      }
    }
    if (task.capture_mode && is_leaf_node) continue;  // grad() never writes .grad

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
      if (task.capture_mode && !task.needed.count(next)) continue;
      if (results[i].defined()) {
        GradModeGuard mode(task.create_graph);
        accumulate_into(buffer_of(next), e.input_nr, validate(*node, i, e, std::move(results[i])),
                        task.create_graph);
      }
      if (--task.dependencies[next] == 0 && queued.insert(next).second) {
        ready.emplace(next->sequence_nr(), next);
      }
    }
  }
}

}  // namespace

void backward(const TensorList& outputs, const TensorList& grad_outputs,
              std::optional<bool> retain_graph, bool create_graph) {
  Task task;
  task.create_graph = create_graph;
  task.keep_graph = retain_graph.value_or(create_graph);
  run(task, outputs, grad_outputs);
}

TensorList grad(const TensorList& outputs, const TensorList& inputs, const TensorList& grad_outputs,
                std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
  Task task;
  task.create_graph = create_graph;
  task.keep_graph = retain_graph.value_or(create_graph);
  task.capture_mode = true;
  task.captured.resize(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "One of the differentiated "
               "Tensors does not require grad (input ", i, ", ", inputs[i].describe(), ")");
    const Edge e = gradient_edge(inputs[i]);
    task.captures[e.function.get()].emplace_back(e.input_nr, i);
    task.nodes.push_back(e.function);
  }
  run(task, outputs, grad_outputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(allow_unused || task.captured[i].defined(),
               "One of the differentiated Tensors appears to not have been used in the graph. "
               "Set allow_unused=True if this is the desired behavior.");
  }
  return task.captured;
}

}  // namespace kiln::autograd

namespace kiln {

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

}  // namespace kiln
