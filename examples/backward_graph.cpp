// examples/backward_graph.cpp — draws the backward graph of a small model as Graphviz DOT,
// and renders it to backward_graph.png when the `dot` program is installed (Debian package
// graphviz); otherwise prints the DOT text. Run: build/examples/backward_graph
// Read next: autograd/graph.h, examples/walkthrough.cpp.
#include <kiln.h>

#include "support/flags.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/autograd_meta.h"

int show_backward_graph() {
  using namespace kiln;
  manual_seed(0);
  Tensor w1 = (randn({4, 3}) * 0.5).as_leaf(true);
  Tensor b1 = zeros({4}, requires_grad());
  Tensor w2 = (randn({2, 4}) * 0.5).as_leaf(true);
  // Names show up on the leaves of the graph (nn::Module sets them when it registers them).
  w1.impl()->autograd_meta().name = "fc1.weight";
  b1.impl()->autograd_meta().name = "fc1.bias";
  w2.impl()->autograd_meta().name = "fc2.weight";
  Tensor x = randn({5, 3});
  Tensor target = tensor({0, 1, 1, 0, 1});
  Tensor loss = cross_entropy(linear(linear(x, w1, b1).relu(), w2), target);

  const std::string dot = autograd::to_dot(loss);
  std::ofstream("backward_graph.dot") << dot;
  if (std::system("command -v dot >/dev/null 2>&1") == 0 &&
      std::system("dot -Tpng backward_graph.dot -o backward_graph.png") == 0) {
    std::printf("wrote backward_graph.dot and backward_graph.png (%zu bytes of DOT)\n", dot.size());
  } else {
    std::printf("%s\n(install Debian's graphviz to render this as backward_graph.png)\n", dot.c_str());
  }
  loss.backward();
  std::printf("loss %.4f; fc1.weight.grad norm %.4f\n", loss.item<double>(), w1.grad().norm().item<double>());
  return 0;
}

int main(int argc, char** argv) {
  return kiln::examples::run_program("backward_graph", [&] {
    kiln::examples::Flags("backward_graph", "a backward graph, printed and exported for Graphviz")
        .parse(argc, argv);
    return show_backward_graph();
  });
}
