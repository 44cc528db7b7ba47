// tests/nn/test_module_hook_variants.cpp — the register_* options and hooks beyond the three
// basic ones, with PyTorch's order and values: prepend, always_call forward hooks (run when
// forward throws), full backward pre-hooks (see and replace grad_output), and the global
// module hooks every module's call runs before its own.
#include <stdexcept>
#include <string>
#include <vector>

#include "core/warning.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

namespace {

/// forward throws: what always_call is for.
class Throwing : public nn::Module {
 public:
  Throwing() : Module("Throwing") {}
  Tensor forward(const Tensor&) override { throw std::runtime_error("forward failed"); }
};

/// Collects warnings while alive.
class CapturedWarnings {
 public:
  CapturedWarnings() : previous_(set_warning_handler([this](const std::string& m) { messages.push_back(m); })) {}
  ~CapturedWarnings() { set_warning_handler(previous_); }
  std::vector<std::string> messages;

 private:
  WarningHandler previous_;
};

/// y = 2x through a module, the doubling done by forward.
class Doubler : public nn::Module {
 public:
  Doubler() : Module("Doubler") {}
  Tensor forward(const Tensor& x) override { return x * 2.0; }
};

}  // namespace

TEST(ModuleHookVariants, PrependPutsAHookBeforeTheOnesAlreadyRegistered) {
  Doubler m;
  std::vector<std::string> order;
  const auto pre = [&](std::string name) { return [&order, name](nn::Module&, const TensorList&) { order.push_back(name); }; };
  const auto post = [&](std::string name) {
    return [&order, name](nn::Module&, const TensorList&, const TensorList&) { order.push_back(name); };
  };
  m.register_forward_pre_hook(pre("pre a"));
  m.register_forward_pre_hook(pre("pre b"));
  m.register_forward_pre_hook(pre("pre first"), {.prepend = true});
  m.register_forward_hook(post("post a"));
  m.register_forward_hook(post("post first"), {.prepend = true});
  m.register_forward_hook(post("post b"));
  m(tensor({1.0}));
  EXPECT_EQ(order, (std::vector<std::string>{"pre first", "pre a", "pre b", "post first", "post a", "post b"}));

  // Prepended backward hooks too: the prepended one sees grad_input first, and its replacement
  // is what the next one sees.
  std::vector<double> seen;
  m.register_full_backward_hook([&](nn::Module&, const TensorList& gi, const TensorList&) { seen.push_back(gi[0].item<double>()); });
  m.register_full_backward_hook(
      [&](nn::Module&, const TensorList& gi, const TensorList&) -> std::optional<TensorList> {
        seen.push_back(gi[0].item<double>());
        return TensorList{gi[0] * 10.0};
      },
      {.prepend = true});
  const Tensor x = tensor({1.0}).requires_grad_();
  m(x).sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{2.0, 20.0}));
  EXPECT_EQ(values(x.grad()), std::vector<double>{20.0});
}

TEST(ModuleHookVariants, AlwaysCallForwardHookRunsWhenForwardThrowsAndTheErrorGoesOn) {
  Throwing m;
  int plain = 0, always = 0;
  std::size_t output_size = 99;
  m.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList&) { ++plain; });
  m.register_forward_hook(
      [&](nn::Module&, const TensorList& args, const TensorList& output) {
        ++always;
        output_size = output.size();
        EXPECT_EQ(values(args[0]), std::vector<double>{3.0});
      },
      {.always_call = true});
  EXPECT_THROW(m(tensor({3.0})), std::runtime_error);
  EXPECT_EQ(plain, 0);
  EXPECT_EQ(always, 1);
  EXPECT_EQ(output_size, 0u);  // PyTorch passes result=None: forward returned nothing
}

TEST(ModuleHookVariants, AlwaysCallHookThatAlreadyRanIsNotRunAgainWhenALaterHookThrows) {
  Doubler m;
  std::vector<std::string> order;
  m.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList& out) {
    order.push_back("always 1 saw " + std::to_string(out[0].item<double>()));
  }, {.always_call = true});
  m.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList&) {
    order.push_back("thrower");
    throw std::runtime_error("hook failed");
  });
  m.register_forward_hook([&](nn::Module&, const TensorList&, const TensorList& out) {
    order.push_back("always 2 saw " + std::to_string(out[0].item<double>()));
    throw std::runtime_error("silenced");
  }, {.always_call = true});
  CapturedWarnings warnings;
  try {
    m(tensor({1.5}));
    FAIL() << "the hook's exception was swallowed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "hook failed");
  }
  EXPECT_EQ(order, (std::vector<std::string>{"always 1 saw 3.000000", "thrower", "always 2 saw 3.000000"}));
  ASSERT_EQ(warnings.messages.size(), 1u);
  EXPECT_NE(warnings.messages[0].find("module forward hook with ``always_call=True`` raised an exception that was "
                                      "silenced as another error was raised in forward: silenced"),
            std::string::npos)
      << warnings.messages[0];
}

TEST(ModuleHookVariants, FullBackwardPreHookSeesGradOutputBeforeTheFullHookAndCanReplaceIt) {
  manual_seed(0);
  nn::Linear fc(3, 2);
  std::vector<std::string> order;
  Tensor pre_seen, full_grad_output, full_grad_input;
  fc.register_full_backward_hook([&](nn::Module&, const TensorList& gi, const TensorList& go) {
    order.push_back("full");
    full_grad_input = gi[0];
    full_grad_output = go[0];
  });
  fc.register_full_backward_pre_hook([&](nn::Module&, const TensorList& go) -> std::optional<TensorList> {
    order.push_back("pre");
    pre_seen = go[0];
    return TensorList{go[0] * 3.0};
  });
  const Tensor x = tensor({{1.0, -2.0, 0.5}, {0.0, 1.0, 2.0}}).requires_grad_();
  const Tensor w = tensor({{1.0, 2.0}, {3.0, 4.0}});
  (fc(x) * w).sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"pre", "full"}));
  EXPECT_EQ(values(pre_seen), values(w));
  // The replacement is the module's grad_output from then on: the full hook sees it, and the
  // gradients of the input and the weight are three times the plain ones.
  EXPECT_EQ(values(full_grad_output), values(w * 3.0));
  const Tensor expected_input_grad = (w * 3.0).matmul(fc.weight.detach());
  EXPECT_EQ(values(x.grad()), values(expected_input_grad));
  EXPECT_EQ(values(full_grad_input), values(expected_input_grad));
  EXPECT_EQ(values(fc.weight.grad()), values((w * 3.0).t().matmul(x.detach())));
}

TEST(ModuleHookVariants, FullBackwardPreHookRunsWhenNoInputRequiresGrad) {
  manual_seed(0);
  nn::Linear fc(2, 1);
  int pre = 0;
  fc.register_full_backward_pre_hook([&](nn::Module&, const TensorList& go) {
    ++pre;
    EXPECT_EQ(values(go[0]), (std::vector<double>{1.0, 1.0}));
  });
  fc(tensor({{1.0, 2.0}, {3.0, 4.0}})).sum().backward();
  EXPECT_EQ(pre, 1);
  EXPECT_EQ(values(fc.bias.grad()), std::vector<double>{2.0});
}

TEST(ModuleHookVariants, FullBackwardPreHookReturningTheWrongNumberIsPyTorchsError) {
  nn::Linear fc(2, 2);
  fc.register_full_backward_pre_hook([](nn::Module&, const TensorList& go) -> std::optional<TensorList> {
    return TensorList{go[0], go[0]};
  });
  const Tensor x = tensor({{1.0, 2.0}}).requires_grad_();
  EXPECT_ERROR(fc(x).sum().backward(), "Backward pre hook returned an invalid number of grad_output, got 2, but expected 1");
}

TEST(ModuleHookVariants, GlobalHooksFireForEveryModuleBeforeItsOwnAndStopWhenRemoved) {
  manual_seed(0);
  nn::Sequential net({std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(3, 1)});
  std::vector<std::string> order;
  (*net[2]).register_forward_pre_hook([&](nn::Module& m, const TensorList&) { order.push_back("own pre " + m.type_name()); });
  (*net[2]).register_forward_hook([&](nn::Module& m, const TensorList&, const TensorList&) { order.push_back("own " + m.type_name()); });
  nn::RemovableHandle pre = nn::register_module_forward_pre_hook(
      [&](nn::Module& m, const TensorList&) { order.push_back("global pre " + m.type_name()); });
  nn::RemovableHandle post = nn::register_module_forward_hook(
      [&](nn::Module& m, const TensorList&, const TensorList&) { order.push_back("global " + m.type_name()); });
  const Tensor x = tensor({{1.0, -1.0}});
  const Tensor y = net(x);
  EXPECT_EQ(order, (std::vector<std::string>{"global pre Sequential", "global pre Linear", "global Linear",
                                             "global pre ReLU", "global ReLU", "global pre Linear", "own pre Linear",
                                             "global Linear", "own Linear", "global Sequential"}));
  pre.remove();
  post.remove();
  order.clear();
  EXPECT_EQ(values(net(x)), values(y));
  EXPECT_EQ(order, (std::vector<std::string>{"own pre Linear", "own Linear"}));
  pre.remove();  // twice: nothing
}

TEST(ModuleHookVariants, GlobalForwardHookReplacesEveryOutputAndAlwaysCallRunsOnThrow) {
  nn::RemovableHandle add_one = nn::register_module_forward_hook(
      [](nn::Module&, const TensorList&, const TensorList& out) -> std::optional<TensorList> {
        return TensorList{out[0] + 1.0};
      });
  Doubler m;
  EXPECT_EQ(values(m(tensor({1.0}))), std::vector<double>{3.0});  // 2x, then + 1
  add_one.remove();
  EXPECT_EQ(values(m(tensor({1.0}))), std::vector<double>{2.0});

  int always = 0;
  nn::RemovableHandle h = nn::register_module_forward_hook([&](nn::Module&, const TensorList&, const TensorList&) { ++always; },
                                                           {.always_call = true});
  Throwing t;
  EXPECT_THROW(t(tensor({1.0})), std::runtime_error);
  EXPECT_EQ(always, 1);
  h.remove();
}

TEST(ModuleHookVariants, GlobalBackwardHooksRunBeforeEachModulesOwn) {
  manual_seed(0);
  nn::Sequential net({std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::Tanh>()});
  std::vector<std::string> order;
  (*net[0]).register_full_backward_hook([&](nn::Module&, const TensorList&, const TensorList&) { order.push_back("own full Linear"); });
  (*net[0]).register_full_backward_pre_hook([&](nn::Module&, const TensorList&) { order.push_back("own pre Linear"); });
  nn::RemovableHandle full = nn::register_module_full_backward_hook(
      [&](nn::Module& m, const TensorList&, const TensorList&) { order.push_back("global full " + m.type_name()); });
  nn::RemovableHandle pre = nn::register_module_full_backward_pre_hook(
      [&](nn::Module& m, const TensorList&) { order.push_back("global pre " + m.type_name()); });
  const Tensor x = tensor({{0.5, -1.0}}).requires_grad_();
  net(x).sum().backward();
  full.remove();
  pre.remove();
  // Backward finishes the Tanh, then the Linear, then the container whose input requires grad.
  EXPECT_EQ(order, (std::vector<std::string>{"global pre Sequential", "global pre Tanh", "global full Tanh",
                                             "global pre Linear", "own pre Linear", "global full Linear",
                                             "own full Linear", "global full Sequential"}));
  order.clear();
  net(x).sum().backward();
  EXPECT_EQ(order, (std::vector<std::string>{"own pre Linear", "own full Linear"}));
}
