// tests/compile/compiled_training.h — three compiled SGD steps of a model under a chosen list of
// passes, and what they leave: the tests of a pass that must keep every bit train with the pass
// and without it and compare. Also same_bits, the comparison of two kernels' results, and
// Trainer, a model with its optimizer and step for eager and compiled runs side by side.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compile/capture.h"
#include "core/backends.h"
#include "kiln.h"

namespace kiln::testing {

/// Whether `a` and `b` hold the same values, NaN where the other has NaN.
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor nan = a.ne(a);
  return equal(nan, b.ne(b)) && equal(a.masked_fill(nan, 0.0), b.masked_fill(nan, 0.0));
}

struct CompiledRun {
  std::vector<double> values;           // the losses, then each parameter's first elements
  std::size_t counted_arguments = 0;    // kernel arguments of the graph that `counted` accepts
  std::int64_t reorders = 0;            // oneDNN's reorders in the last replay
};

/// A model, its optimizer and the step function, eager or compiled.
template <class Model>
struct Trainer {
  explicit Trainer(std::uint64_t seed, DType dtype, bool adam) {
    manual_seed(seed);
    model = std::make_shared<Model>();
    model->to(dtype);
    if (adam) opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(1e-2));
    else opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  }
  Tensor step(const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt->step();
    return loss;
  }
  std::shared_ptr<Model> model;
  std::unique_ptr<optim::Optimizer> opt;
};

/// Trains a Model(args...) in `dtype` three SGD steps compiled with `passes`, from fixed seeds.
template <class Model, class... Args>
CompiledRun train_compiled(const std::string& passes, DType dtype, const Shape& input, std::int64_t classes,
                           const std::function<bool(const Tensor&)>& counted, Args... args) {
  manual_seed(9);
  auto model = std::make_shared<Model>(args...);
  model->to(dtype);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto step = compile(
      [&](const Tensor& x, const Tensor& y) {
        opt.zero_grad();
        Tensor loss = cross_entropy(model->forward(x), y);
        loss.backward();
        opt.step();
        return loss;
      },
      {.passes = passes});
  manual_seed(4);
  CompiledRun run;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t before = backends::onednn_stats().reorders;
    run.values.push_back(step(rand(input).to(dtype), randint(0, classes, {input[0]})).template item<double>());
    run.reorders = backends::onednn_stats().reorders - before;
  }
  for (const Tensor& p : model->parameters()) {
    const Tensor flat = p.flatten();
    for (std::int64_t k = 0; k < std::min<std::int64_t>(flat.numel(), 64); ++k) {
      run.values.push_back(flat[k].template item<double>());
    }
  }
  for (const compiler::Node& node : step.graph().nodes) {
    if (node.kind != compiler::Node::Kind::Kernel) continue;
    for (const Tensor* t : std::as_const(*node.call).tensors()) run.counted_arguments += t->defined() && counted(*t);
  }
  return run;
}

}  // namespace kiln::testing
