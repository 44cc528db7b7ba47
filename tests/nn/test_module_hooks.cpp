// tests/nn/test_module_hooks.cpp — forward pre-hooks, forward hooks and full backward hooks:
// a CNN's activations and gradients captured layer by layer as PyTorch users do for
// visualisation, the order hooks fire in (PyTorch's), replacing inputs, outputs and
// grad_input, removal, and hooks on modules with several tensors.
#include <map>
#include <string>
#include <vector>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

namespace {

/// conv -> relu -> pool -> flatten -> linear, every layer a module of one Sequential.
std::shared_ptr<nn::Sequential> small_cnn() {
  manual_seed(0);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Conv2d>(1, 4, 3, nn::Conv2dOptions{.padding = {1, 1}}), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(64, 3)});
}

Tensor images() {
  manual_seed(1);
  return randn({2, 1, 8, 8});
}

/// The layers run one by one through forward(), which no hook sees: the reference.
TensorList layer_by_layer(nn::Sequential& net, const Tensor& x) {
  TensorList outs;
  Tensor h = x;
  for (std::size_t i = 0; i < net.size(); ++i) outs.push_back(h = net[i]->forward(h));
  return outs;
}

}  // namespace

TEST(ModuleHooks, ForwardHooksCaptureEveryLayersActivationThroughAContainer) {
  auto net = small_cnn();
  std::map<std::string, Tensor> activations;
  std::vector<std::string> order;
  for (auto& [name, module] : net->named_modules()) {
    module->register_forward_hook([&, name = name](nn::Module&, const TensorList& args, const TensorList& out) {
      EXPECT_EQ(args.size(), 1u);
      activations[name] = out[0].detach();
      order.push_back(name);
    });
  }
  const Tensor x = images();
  const Tensor y = (*net)(x);
  // Children finish before the container that called them.
  EXPECT_EQ(order, (std::vector<std::string>{"0", "1", "2", "3", "4", ""}));
  const TensorList reference = layer_by_layer(*net, x);
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_EQ(values(activations[std::to_string(i)]), values(reference[i])) << "layer " << i;
  }
  EXPECT_EQ(values(activations[""]), values(y));
}

TEST(ModuleHooks, PreHooksRunContainerFirstAndForwardHooksAfterIt) {
  auto net = small_cnn();
  std::vector<std::string> order;
  for (auto& [name, module] : net->named_modules()) {
    const std::string label = name.empty() ? "net" : name;
    module->register_forward_pre_hook(
        [&order, label](nn::Module&, const TensorList&) { order.push_back("pre " + label); });
    module->register_forward_hook(
        [&order, label](nn::Module&, const TensorList&, const TensorList&) { order.push_back("post " + label); });
  }
  (void)(*net)(images());
  EXPECT_EQ(order, (std::vector<std::string>{"pre net", "pre 0", "post 0", "pre 1", "post 1", "pre 2", "post 2",
                                             "pre 3", "post 3", "pre 4", "post 4", "post net"}));
}

TEST(ModuleHooks, HooksOfOneModuleRunInRegistrationOrderAndEachSeesThePreviousReplacement) {
  nn::Identity id;
  std::vector<double> seen;
  id.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList& out) -> std::optional<TensorList> {
    seen.push_back(out[0].item<double>());
    return TensorList{out[0] + 1.0};
  });
  id.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList& out) -> std::optional<TensorList> {
    seen.push_back(out[0].item<double>());
    return TensorList{out[0] * 10.0};
  });
  const Tensor y = id(tensor({1.0}));
  EXPECT_EQ(seen, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(values(y), std::vector<double>{20.0});
}

TEST(ModuleHooks, ForwardHookReplacesTheOutputTheContainerPassesOn) {
  auto net = small_cnn();
  const Tensor x = images();
  const TensorList reference = layer_by_layer(*net, x);
  // Zero the ReLU's output: the Linear then sees zeros and returns its bias.
  nn::RemovableHandle handle = (*net)[1]->register_forward_hook(
      [](nn::Module&, const TensorList&, const TensorList& out) -> std::optional<TensorList> {
        return TensorList{out[0] * 0.0};
      });
  const Tensor zeroed = (*net)(x);
  const Tensor bias = std::static_pointer_cast<nn::Linear>((*net)[4])->bias;
  EXPECT_EQ(values(zeroed), values(bias.unsqueeze(0).expand({2, 3})));
  handle.remove();
  EXPECT_EQ(values((*net)(x)), values(reference.back()));
}

TEST(ModuleHooks, ForwardPreHookReplacesTheInput) {
  nn::Linear fc(2, 1);
  fc.register_forward_pre_hook(
      [](nn::Module&, const TensorList& args) -> std::optional<TensorList> { return TensorList{args[0] * 2.0}; });
  const Tensor x = tensor({{1.0, -3.0}});
  EXPECT_EQ(values(fc(x)), values(fc.forward(x * 2.0)));
}

TEST(ModuleHooks, RemovedHooksNoLongerFireAndRemovingTwiceIsHarmless) {
  nn::ReLU relu;
  int pre = 0, post = 0;
  nn::RemovableHandle a = relu.register_forward_pre_hook([&](nn::Module&, const TensorList&) { ++pre; });
  nn::RemovableHandle b =
      relu.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList&) { ++post; });
  (void)relu(tensor({1.0}));
  a.remove();
  (void)relu(tensor({1.0}));
  b.remove();
  b.remove();
  (void)relu(tensor({1.0}));
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(post, 2);
  // A hook registered after every other was removed fires again.
  nn::RemovableHandle c =
      relu.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList&) { ++post; });
  (void)relu(tensor({1.0}));
  EXPECT_EQ(post, 3);
}

TEST(ModuleHooks, AHandleOutlivingItsModuleRemovesNothing) {
  nn::RemovableHandle handle;
  {
    nn::ReLU relu;
    handle = relu.register_forward_hook([](nn::Module&, const TensorList&, const TensorList&) {});
  }
  handle.remove();
}

TEST(ModuleHooks, FullBackwardHooksCaptureEveryLayersGradients) {
  auto net = small_cnn();
  std::map<std::string, TensorList> grad_inputs, grad_outputs;
  std::vector<std::string> order;
  for (auto& [name, module] : net->named_modules()) {
    module->register_full_backward_hook(
        [&, name = name](nn::Module&, const TensorList& grad_input, const TensorList& grad_output) {
          grad_inputs[name] = grad_input;
          grad_outputs[name] = grad_output;
          order.push_back(name);
        });
  }
  const Tensor x = images();
  (*net)(x).pow(2).sum().backward();
  // The images require no grad, so the container's hook runs as soon as its output's gradient
  // is known (before its children's), and the first conv's grad_input is undefined: PyTorch's
  // order and values.
  EXPECT_EQ(order, (std::vector<std::string>{"", "4", "3", "2", "1", "0"}));
  EXPECT_FALSE(grad_inputs[""][0].defined());
  EXPECT_FALSE(grad_inputs["0"][0].defined());

  // The reference: the gradient of the same loss with respect to each layer's output.
  const TensorList outs = layer_by_layer(*net, x);
  const TensorList expected = autograd::grad({outs.back().pow(2).sum()}, outs);
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const std::string name = std::to_string(i);
    ASSERT_EQ(grad_outputs[name].size(), 1u);
    EXPECT_EQ(values(grad_outputs[name][0]), values(expected[i])) << "grad_output of layer " << i;
    if (i > 0) {
      EXPECT_EQ(values(grad_inputs[name][0]), values(expected[i - 1])) << "grad_input of layer " << i;
    }
  }
  EXPECT_EQ(values(grad_outputs[""][0]), values(expected.back()));
}

TEST(ModuleHooks, BackwardHookOfAContainerWhoseInputRequiresGradRunsAfterItsChildren) {
  auto net = small_cnn();
  std::vector<std::string> order;
  Tensor container_grad_input;
  for (auto& [name, module] : net->named_modules()) {
    module->register_full_backward_hook([&, name = name](nn::Module&, const TensorList& grad_input, const TensorList&) {
      order.push_back(name);
      if (name.empty()) container_grad_input = grad_input[0];
    });
  }
  const Tensor x = images().requires_grad_();
  (*net)(x).sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"4", "3", "2", "1", "0", ""}));
  EXPECT_EQ(values(container_grad_input), values(x.grad()));
}

TEST(ModuleHooks, BackwardHookReplacesGradInput) {
  auto net = small_cnn();
  // The Linear passes no gradient back: everything before it learns nothing.
  (*net)[4]->register_full_backward_hook(
      [](nn::Module&, const TensorList& grad_input, const TensorList&) -> std::optional<TensorList> {
        return TensorList{zeros_like(grad_input[0])};
      });
  (*net)(images()).sum().backward();
  const auto conv = std::static_pointer_cast<nn::Conv2d>((*net)[0]);
  EXPECT_EQ(values(conv->weight.grad()), std::vector<double>(conv->weight.numel(), 0.0));
  const auto fc = std::static_pointer_cast<nn::Linear>((*net)[4]);
  EXPECT_NE(values(fc->weight.grad()), std::vector<double>(fc->weight.numel(), 0.0));
}

TEST(ModuleHooks, BackwardHookReturningTheWrongNumberOfGradientsIsPyTorchsError) {
  nn::Linear fc(2, 2);
  fc.register_full_backward_hook(
      [](nn::Module&, const TensorList& grad_input, const TensorList&) -> std::optional<TensorList> {
        return TensorList{grad_input[0], grad_input[0]};
      });
  const Tensor x = tensor({{1.0, 2.0}}).requires_grad_();
  EXPECT_ERROR(fc(x).sum().backward(), "Backward hook returned an invalid number of grad_input, got 2, but expected 1");
}

TEST(ModuleHooks, RemovedBackwardHookDoesNotFire) {
  nn::Linear fc(2, 2);
  int calls = 0;
  nn::RemovableHandle h =
      fc.register_full_backward_hook([&](nn::Module&, const TensorList&, const TensorList&) { ++calls; });
  const Tensor x = tensor({{1.0, 2.0}}).requires_grad_();
  fc(x).sum().backward();
  h.remove();
  fc(x).sum().backward();
  EXPECT_EQ(calls, 1);
}

TEST(ModuleHooks, ModulesWithSeveralTensorsShowThemAsFlatLists) {
  manual_seed(0);
  nn::LSTM lstm(3, 4);
  std::size_t n_args = 0, n_out = 0, n_grad_out = 0;
  lstm.register_forward_hook([&](nn::Module&, const TensorList& args, const TensorList& out) {
    n_args = args.size();
    n_out = out.size();
  });
  lstm.register_full_backward_hook([&](nn::Module&, const TensorList&, const TensorList& grad_output) {
    n_grad_out = grad_output.size();
    // Only the output sequence was used: h_n and c_n got no gradient.
    EXPECT_TRUE(grad_output[0].defined());
    EXPECT_FALSE(grad_output[1].defined());
  });
  const Tensor x = randn({5, 2, 3}).requires_grad_();
  auto [out, state] = lstm(x);
  out.sum().backward();
  EXPECT_EQ(n_args, 3u);  // input, h_0, c_0 (undefined: not given)
  EXPECT_EQ(n_out, 3u);   // output, h_n, c_n
  EXPECT_EQ(n_grad_out, 3u);

  nn::MultiheadAttention mha(4, 2);
  int mha_calls = 0;
  mha.register_forward_hook([&](nn::Module&, const TensorList& args, const TensorList& out) {
    EXPECT_EQ(args.size(), 5u);  // query, key, value, key_padding_mask, attn_mask
    EXPECT_EQ(out.size(), 2u);   // output, weights
    ++mha_calls;
  });
  const Tensor q = randn({3, 1, 4});
  (void)mha(q, q, q);
  EXPECT_EQ(mha_calls, 1);
}

// Cells and losses are modules too, called with two tensors: their hooks see both, and a
// backward hook on a cell gets the gradients of its input and its state.
TEST(ModuleHooks, CellsAndLossesCalledWithTwoTensorsFireTheirHooks) {
  manual_seed(0);
  nn::GRUCell gru(3, 4);
  nn::LSTMCell lstm(3, 4);
  nn::CrossEntropyLoss loss;
  std::vector<std::size_t> seen;  // args, then outputs, per forward hook call
  auto record = [&seen](nn::Module&, const TensorList& args, const TensorList& out) {
    seen.push_back(args.size());
    seen.push_back(out.size());
  };
  gru.register_forward_hook(record);
  lstm.register_forward_hook(record);
  TensorList gru_grad_input;
  gru.register_full_backward_hook([&](nn::Module&, const TensorList& grad_input, const TensorList&) {
    gru_grad_input = grad_input;
  });
  Tensor target_seen;
  loss.register_forward_pre_hook([&](nn::Module&, const TensorList& args) { target_seen = args[1]; });

  const Tensor x = randn({2, 3}).requires_grad_(), h = randn({2, 4}).requires_grad_();
  const Tensor h1 = gru(x, h);
  const auto [h2, c2] = lstm(randn({2, 3}), {h1, h1});  // x and h reach the loss only through the GRU cell
  const Tensor target = randint(0, 4, {2});
  loss(h2 + c2, target).backward();

  EXPECT_EQ(seen, (std::vector<std::size_t>{2, 1, 3, 2}));  // GRUCell (x, h) -> h'; LSTMCell (x, h, c) -> (h', c')
  EXPECT_TRUE(target_seen.equal(target));
  ASSERT_EQ(gru_grad_input.size(), 2u);
  EXPECT_EQ(values(gru_grad_input[0]), values(x.grad()));
  EXPECT_EQ(values(gru_grad_input[1]), values(h.grad()));
}

TEST(ModuleHooks, TransformerLayersFireInsideTheEncoder) {
  manual_seed(0);
  nn::TransformerEncoder encoder(nn::TransformerEncoderLayerArgs{.d_model = 8, .nhead = 2, .dim_feedforward = 16},
                                 2);
  std::vector<std::string> fired;
  for (auto& [name, module] : encoder.named_modules()) {
    module->register_forward_hook(
        [&fired, name = name](nn::Module&, const TensorList&, const TensorList&) { fired.push_back(name); });
  }
  (void)encoder(randn({4, 1, 8}), nn::generate_square_subsequent_mask(4));
  // Every module of the tree ran through its call operator, except the ModuleList (never called).
  EXPECT_EQ(fired.size(), encoder.named_modules().size() - 1);
  EXPECT_EQ(fired.back(), "");
}
