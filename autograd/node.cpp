// autograd/node.cpp — node bookkeeping: sequence numbers, hooks, and iterative destruction.
#include "autograd/node.h"

#include <algorithm>

#include "autograd/accumulate_grad.h"

namespace kiln {

const char* node_name(const autograd::Node& node) { return node.name(); }

namespace autograd {

namespace {
// Per thread, as in PyTorch: the number only orders nodes of one graph, which one thread
// records, and a shared atomic counter cost a locked instruction on every recorded op.
thread_local std::uint64_t t_next_sequence_nr = 0;

// Nodes whose last owner is being destroyed, collected so that destruction is a loop rather
// than a recursion through next_edges (a 100,000-op chain would otherwise overflow the stack).
thread_local std::vector<std::shared_ptr<Node>> t_graveyard;
thread_local bool t_draining = false;
}  // namespace

Node::Node() : sequence_nr_(t_next_sequence_nr++) {}

std::uint64_t peek_sequence_nr() { return t_next_sequence_nr; }

Node::~Node() {
  for (Edge& e : next_edges_) {
    if (e.function) t_graveyard.push_back(std::move(e.function));
  }
  if (t_draining) return;
  t_draining = true;
  while (!t_graveyard.empty()) {
    std::shared_ptr<Node> victim = std::move(t_graveyard.back());
    t_graveyard.pop_back();
    victim.reset();  // if this was the last owner, its destructor only queues its children
  }
  t_draining = false;
}

int Node::add_pre_hook(std::uint32_t output_nr, GradHook hook) {
  const int id = next_hook_id_++;
  pre_hooks_.push_back({id, output_nr, std::move(hook)});
  return id;
}

void Node::remove_pre_hook(int id) {
  std::erase_if(pre_hooks_, [id](const PreHook& h) { return h.id == id; });
}

void Node::run_pre_hooks(std::uint32_t output_nr, Tensor& grad) const {
  for (const PreHook& h : pre_hooks_) {
    if (h.output_nr != output_nr) continue;
    Tensor replaced = h.fn(grad);
    if (replaced.defined()) grad = std::move(replaced);
  }
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  return {AccumulateGrad::for_leaf(t), 0};
}

}  // namespace autograd
}  // namespace kiln
