// examples/walkthrough.cpp — one training step of a 2-layer MLP, printed stage by stage in
// the order data flows through Kiln (docs/internals.md follows the same path through the
// code): the tensors created and their terms, the nodes the forward records, the gradients
// arriving during backward, AccumulateGrad filling .grad, the optimizer's in-place update
// (watch the version counters), and the allocator's statistics. Writes the backward graph to
// walkthrough.dot (and walkthrough.png when Graphviz's `dot` is installed).
//   build/examples/walkthrough
// Read next: docs/internals.md.
#include <kiln.h>

#include "support/flags.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "autograd/node.h"

namespace {

using namespace kiln;

template <class T>
std::string text(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void show_terms(const char* name, const Tensor& t) {
  std::printf("  %-10s %-14s %-14s %-5s requires_grad=%-5s leaf=%-5s grad_fn=%-16s version=%u\n", name,
              text(t.sizes()).c_str(), text(t.dtype()).c_str(), t.device().str().c_str(),
              t.requires_grad() ? "true" : "false", t.is_leaf() ? "true" : "false",
              t.grad_fn() ? t.grad_fn()->name() : "-", t._version());
  std::printf("  %-10s %s\n", "", t.describe().c_str());
}

/// Every node reachable from `root`, depth first, with what it saved for backward.
void show_graph(const std::shared_ptr<autograd::Node>& node, std::set<const autograd::Node*>& seen, int depth) {
  if (!node || !seen.insert(node.get()).second) return;
  std::printf("  %*s%s", depth * 2, "", node->name());
  const std::vector<std::string> saved = node->saved_summary();
  if (!saved.empty()) {
    std::printf("  saved:");
    for (const std::string& s : saved) std::printf(" %s", s.c_str());
  }
  std::printf("\n");
  for (const autograd::Edge& e : node->next_edges()) show_graph(e.function, seen, depth + 1);
}

void show_memory(const char* when) {
  const CpuAllocatorStats s = cpu_allocator_stats();
  std::printf("  [%s] CPU allocator: %lld bytes in live tensors, %lld cached, %lld hits / %lld misses\n", when,
              static_cast<long long>(s.allocated_bytes), static_cast<long long>(s.cached_bytes),
              static_cast<long long>(s.cache_hits), static_cast<long long>(s.cache_misses));
}

/// `text` with every line indented by three spaces, as the walkthrough's other output.
std::string indented(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    out += "   " + text.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

int walk_through_one_step() {
  manual_seed(0);
  std::printf("1. Creation: every tensor's terms are fixed here (Note [The creation contract])\n");
  nn::Linear fc1(4, 8), fc2(8, 3);
  const Tensor x = randn({2, 4});
  const Tensor target = tensor(std::vector<std::int64_t>{0, 2});
  show_terms("x", x);
  show_terms("target", target);
  show_terms("fc1.weight", fc1.weight);
  show_terms("fc1.bias", fc1.bias);
  show_memory("after creation");

  std::printf("\n2. Forward: each op runs autocast -> Function::apply -> raw op -> kernel, and its output\n"
              "   is created with its grad_fn (autograd/function.h)\n");
  const Tensor hidden = fc1.forward(x).relu();
  const Tensor logits = fc2.forward(hidden);
  const Tensor loss = cross_entropy(logits, target);
  show_terms("hidden", hidden);
  show_terms("loss", loss);
  std::printf("   the graph recorded, from the loss down to the leaves (saved tensors for backward):\n");
  std::set<const autograd::Node*> seen;
  show_graph(loss.grad_fn(), seen, 1);
  const std::string dot = autograd::to_dot(loss);
  std::ofstream("walkthrough.dot") << dot;
  const bool png = std::system("command -v dot >/dev/null 2>&1") == 0 &&
                   std::system("dot -Tpng walkthrough.dot -o walkthrough.png") == 0;
  std::printf("   wrote walkthrough.dot%s\n", png ? " and walkthrough.png" : " (install graphviz for a PNG)");
  show_memory("after forward");

  std::printf("\n3. Backward: the engine walks the graph in dependency order (autograd/engine.cpp);\n"
              "   hooks show gradients arriving, AccumulateGrad stores them in the leaves' .grad\n");
  hidden.register_hook([](const Tensor& g) {
    std::printf("   grad arriving at hidden: shape %s, norm %.4f\n", text(g.sizes()).c_str(), g.norm().item<double>());
    return Tensor();
  });
  logits.register_hook([](const Tensor& g) {
    std::printf("   grad arriving at logits: shape %s, norm %.4f (softmax - onehot, / batch)\n",
                text(g.sizes()).c_str(), g.norm().item<double>());
    return Tensor();
  });
  loss.backward();
  std::printf("   fc1.weight.grad: %s, norm %.4f; hidden.grad is undefined (not a leaf): %s\n",
              text(fc1.weight.grad().sizes()).c_str(), fc1.weight.grad().norm().item<double>(),
              autograd::explain(hidden).c_str());
  show_memory("after backward (saved tensors freed)");

  std::printf("\n4. Optimizer: SGD updates the parameters in place under NoGradGuard (optim/optimizer.cpp);\n"
              "   each in-place write bumps the version counter\n");
  optim::SGD opt(std::vector<Tensor>{fc1.weight, fc1.bias, fc2.weight, fc2.bias}, optim::SGDOptions(0.1));
  const std::uint32_t before = fc1.weight._version();
  const Tensor w_before = fc1.weight.detach().clone();
  opt.step();
  std::printf("   fc1.weight version %u -> %u; max |change| %.4f = lr * max |grad| %.4f\n", before,
              fc1.weight._version(), (fc1.weight.detach() - w_before).abs().max().item<double>(),
              0.1 * fc1.weight.grad().abs().max().item<double>());
  std::printf("   the parameter is still a leaf with no grad_fn: %s\n", fc1.weight.is_leaf() ? "yes" : "no");
  opt.zero_grad();
  show_memory("after the step");
  std::printf("\n5. Memory: freed blocks stay cached for the next step (Note [CPU caching allocator]); on a\n"
              "   GPU the caching allocator does the same per stream (Note [Caching allocator]).\n");

  std::printf("\n6. Compiled: the same step captured once as a graph of kernel calls (Note [Capturing a\n"
              "   step] in compile/capture.h). Before the passes, every kernel the eager step ran, with\n"
              "   the regions that replay as they are (optimizer.step) and the gradients bound to leaves:\n");
  auto step_function = [&](const Tensor& input, const Tensor& labels) {
    opt.zero_grad();
    const Tensor l = cross_entropy(fc2.forward(fc1.forward(input).relu()), labels);
    l.backward();
    opt.step();
    return l;
  };
  auto raw = compile(step_function, {.passes = "none"});
  raw(x, target);
  std::printf("%s", indented(raw.graph().print()).c_str());
  auto planned = compile(step_function);
  planned(x, target);
  std::printf("   After the passes (compile/passes.h): the temporaries share one arena, so a replay allocates\n"
              "   nothing; a second call replays the graph: %s\n",
              planned.graph().print().substr(planned.graph().print().rfind("  # arena")).c_str() + 4);
  planned(x, target);
  std::printf("   replayed: %s, loss %.4f\n", planned.last_call_replayed() ? "yes" : "no",
              planned(x, target).item<double>());
  return 0;
}

int main(int argc, char** argv) {
  return kiln::examples::run_program("walkthrough", [&] {
    kiln::examples::Flags("walkthrough", "one training step printed stage by stage, its backward graph and its "
                          "compiled graph").parse(argc, argv);
    return walk_through_one_step();
  });
}
