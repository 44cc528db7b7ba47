// tests/compile/compiled_training.h — three compiled SGD steps of a model under a chosen list of
// passes, and what they leave: the tests of a pass that must keep every bit train with the pass
// and without it and compare. Also same_bits, the comparison of two kernels' results, and
// Trainer and expect_same_training: a model trained eagerly and compiled side by side.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
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

/// The largest absolute difference between two models' parameters.
inline double parameter_gap(nn::Module& a, nn::Module& b) {
  const TensorList pa = a.parameters(), pb = b.parameters();
  double gap = 0.0;
  for (std::size_t i = 0; i < pa.size(); ++i) gap = std::max(gap, (pa[i] - pb[i]).abs().max().item<double>());
  return gap;
}

/// Trains `steps` steps eagerly and compiled with `passes`, from the same seed and the same
/// batches, and checks that they agree after each; then hands the compiled step's graph to
/// `inspect`, if given.
template <class Model>
void expect_same_training(const Shape& input, std::int64_t classes, DType dtype, bool adam, int steps,
                          double tolerance, const std::string& passes = "all",
                          const std::function<void(const compiler::Graph&)>& inspect = {}) {
  Trainer<Model> eager(7, dtype, adam), compiled(7, dtype, adam);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); }, {.passes = passes});
  manual_seed(11);
  for (int i = 0; i < steps; ++i) {
    const Tensor x = randn(input, TensorOptions().dtype(dtype));
    const Tensor y = randint(0, classes, {input[0]});
    // Dropout draws from the one generator: both runs must start each step from the same state.
    const Tensor stream = get_rng_state();
    const double eager_loss = eager.step(x, y).template item<double>();
    set_rng_state(stream);
    const double compiled_loss = step(x, y).template item<double>();
    ASSERT_NEAR(compiled_loss, eager_loss, tolerance) << "step " << i;
    ASSERT_LE(parameter_gap(*eager.model, *compiled.model), tolerance) << "step " << i;
    if (i > 0) {
      EXPECT_TRUE(step.last_call_replayed()) << "step " << i << ": " << step.eager_reason();
    }
  }
  EXPECT_EQ(step.stats().captures, 1);
  EXPECT_EQ(step.stats().replays, steps - 1);
  if (inspect) inspect(step.graph());
}

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

/// A Transformer layer (packed self-attention under a causal mask, 2 heads) and a classifier:
/// what the attention passes' tests train.
struct TinyTransformer : nn::Module {
  explicit TinyTransformer(double dropout = 0.0, bool batch_first = false)
      : Module("TinyTransformer"), batch_first(batch_first) {
    layer = register_module("layer", std::make_shared<nn::TransformerEncoderLayer>(
                                         16, 2, nn::TransformerEncoderLayerArgs{.dim_feedforward = 24,
                                                                                .dropout = dropout,
                                                                                .batch_first = batch_first}));
    head = register_module("head", std::make_shared<nn::Linear>(16, 5));
  }
  // x [L, N, 16] -> [L, 5]; batch first, x [N, L, 16] -> [N, 5].
  Tensor forward(const Tensor& x) override {
    const std::int64_t L = x.size(batch_first ? 1 : 0);
    const Tensor mask = triu(ones({L, L}, TensorOptions().dtype(kBool)), 1);
    return head->forward(layer->forward(x, mask).mean({1}));
  }
  bool batch_first;
  std::shared_ptr<nn::TransformerEncoderLayer> layer;
  std::shared_ptr<nn::Linear> head;
};

/// The same on batch-first input (Note [Batch-first rows stay in their order] in nn/attention.cpp).
struct TinyBatchFirstTransformer : TinyTransformer {
  TinyBatchFirstTransformer() : TinyTransformer(0.0, /*batch_first=*/true) {}
};
}  // namespace kiln::testing
