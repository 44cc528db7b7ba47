// tests/nn/test_module.cpp — modules: registration (and what is not registered), names,
// modes, device/dtype moves that keep optimizers working, printing, PyTorch-identical
// initialisation, and state dicts.
#include "core/autograd_meta.h"
#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;
using kiln::testing::values_near;

namespace {

struct Net : nn::Module {
  std::shared_ptr<nn::Sequential> features;
  std::shared_ptr<nn::Linear> head;
  Tensor scale;  // held, never registered: invisible to parameters()
  Net() : Module("Net") {
    features = register_module("features", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                                               std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>()}));
    head = register_module("head", std::make_shared<nn::Linear>(3, 2));
    scale = ones({2}, requires_grad());
  }
  Tensor forward(const Tensor& x) override { return head->forward(features->forward(x)) * scale; }
};

}  // namespace

// Issue 31: a 0-d input read a last dim that does not exist and printed a garbage size,
// "(0x94026747471408 and 784x512)". PyTorch's linear reports it as matmul does.
TEST(Module, LinearOnA0dInputIsMatmulsError) {
  nn::Linear fc(784, 512);
  EXPECT_ERROR(fc.forward(tensor(1.0f)), "both arguments to matmul need to be at least 1D, but they are 0D and 2D");
  EXPECT_ERROR(fc.forward(ones({2, 3, 5})), "mat1 and mat2 shapes cannot be multiplied (6x5 and 784x512)");
  // The rows are counted, not divided out of numel: an empty batch still names its shape.
  EXPECT_ERROR(fc.forward(ones({0, 5})), "mat1 and mat2 shapes cannot be multiplied (0x5 and 784x512)");
  EXPECT_ERROR(nn::Linear(3, 0).forward(ones({4, 0})), "mat1 and mat2 shapes cannot be multiplied (4x0 and 3x0)");
}

// Sizes a recurrent layer multiplies (4 gates × hidden_size) are checked, not wrapped: 4 * 2^62
// wrapped to 0 (undefined behaviour), and the error came later, from a weight said to have 0 rows.
TEST(Module, RecurrentSizesThatOverflowAreErrors) {
  const std::int64_t huge = std::int64_t{1} << 62;
  EXPECT_ERROR(nn::LSTM(4, huge), "the gates' rows, gates * hidden_size = 4 * 4611686018427387904 does not fit in int64");
  EXPECT_ERROR(nn::LSTMCell(4, huge), "the gates' rows, gates * hidden_size = 4 * 4611686018427387904 does not fit in int64");
}

TEST(Module, RegistersNestedNamesInOrder) {
  Net net;
  std::vector<std::string> names;
  for (const auto& [n, p] : net.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"features.0.weight", "features.0.bias", "head.weight", "head.bias"}));
  EXPECT_EQ(net.num_parameters(), 4 * 3 + 3 + 3 * 2 + 2);
  EXPECT_EQ(net.children().size(), 2u);
  EXPECT_EQ(net.modules().size(), 5u);  // Net, Sequential, Linear, ReLU, Linear
  // Graph labels carry the dotted path.
  EXPECT_EQ(net.features->parameters()[0].impl()->autograd_meta().name, "features.0.weight");
  for (const Tensor& p : net.parameters()) {
    EXPECT_TRUE(p.is_leaf());
    EXPECT_TRUE(p.requires_grad());
  }
}

TEST(Module, AnUnregisteredTensorIsNeverTrained) {
  // The documented failure case: `scale` requires grad and takes part in forward, but the
  // module never registered it, so parameters() and the optimizer never see it.
  manual_seed(0);
  Net net;
  for (const Tensor& p : net.parameters()) EXPECT_FALSE(p.is_same(net.scale));
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.5));
  const auto before = values(net.scale);
  for (int i = 0; i < 3; ++i) {
    opt.zero_grad();
    net.forward(randn({8, 4})).sum().backward();
    opt.step();
  }
  EXPECT_TRUE(net.scale.grad().defined());   // it even has a gradient...
  EXPECT_EQ(values(net.scale), before);      // ...that no optimizer ever applies
}

TEST(Module, RegistrationRules) {
  nn::Module m("M");
  Tensor w = ones({2}, requires_grad());
  EXPECT_ERROR(m.register_parameter("w", w * 2), "cannot register parameter 'w' in M: the tensor is the output of MulBackward0");
  Tensor& p = m.register_parameter("w", w);
  EXPECT_TRUE(p.shares_memory(w));  // zero-copy: a new leaf over the same memory
  EXPECT_FALSE(p.is_same(w));
  EXPECT_ERROR(m.register_parameter("w", w), "attribute 'w' already exists in M");
  EXPECT_ERROR(m.register_buffer("a.b", ones({1})), "buffer name can't contain \".\"");
  EXPECT_ERROR(m.register_buffer("running", w), "cannot register buffer 'running'");
  Tensor& frozen = m.register_parameter("frozen", ones({1}), /*requires_grad=*/false);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_EQ(m.num_parameters(/*trainable_only=*/true), 2);
}

TEST(Module, TrainAndEvalChangeDropoutAndBatchNorm) {
  manual_seed(0);
  nn::Dropout drop(0.5);
  Tensor x = ones({1000});
  EXPECT_GT((drop(x) == 0).sum().item<std::int64_t>(), 300);
  drop.eval();
  EXPECT_TRUE(drop(x).is_same(x));

  nn::BatchNorm1d bn(2);
  Tensor batch = tensor({{1., 2.}, {3., 6.}, {5., 10.}});
  Tensor y = bn(batch);
  // Training: batch statistics; running stats move by momentum 0.1 toward mean [3, 6] and
  // unbiased var [4, 16]: [0.3, 0.6] and 0.9 + 0.1 * [4, 16] = [1.3, 2.5].
  EXPECT_TRUE(values_near(bn.running_mean, {0.3, 0.6}, 1e-6));
  EXPECT_TRUE(values_near(bn.running_var, {1.3, 2.5}, 1e-6));
  EXPECT_EQ(bn.num_batches_tracked.item<std::int64_t>(), 1);
  EXPECT_TRUE(values_near(y.select(1, 0), {-1.224742575, 0, 1.224742575}, 1e-5));
  bn.eval();
  Tensor e = bn(batch);  // evaluation: (x - running_mean) / sqrt(running_var + eps)
  EXPECT_TRUE(values_near(e.select(1, 0), {(1 - 0.3) / std::sqrt(1.3 + 1e-5), (3 - 0.3) / std::sqrt(1.3 + 1e-5),
                                           (5 - 0.3) / std::sqrt(1.3 + 1e-5)}, 1e-5));
}

TEST(Module, BatchNormWithOneValuePerChannelIsPyTorchsError) {
  nn::BatchNorm2d bn(256);
  EXPECT_ERROR(bn(randn({1, 256, 1, 1})),
               "Expected more than 1 value per channel when training, got input size [1, 256, 1, 1]");
  bn.eval();
  EXPECT_EQ(bn(randn({1, 256, 1, 1})).sizes(), IntArrayRef({1, 256, 1, 1}));
}

TEST(Module, ToKeepsParameterIdentityForAnEarlierOptimizer) {
  manual_seed(0);
  nn::Linear layer(3, 2);
  optim::SGD opt(layer.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({4, 3});
  layer(x).sum().backward();
  opt.step();  // creates momentum buffers in Float32
  Tensor old_weight = layer.parameters()[0];
  layer.to(kFloat64);
  // The module's own handle now names a Float64 leaf; the old tensor forwards to it.
  EXPECT_EQ(layer.weight.dtype(), kFloat64);
  EXPECT_TRUE(layer.weight.is_leaf() && layer.weight.requires_grad());
  EXPECT_EQ(old_weight.dtype(), kFloat32);  // its terms are still true
  EXPECT_TRUE(nn::current(old_weight).is_same(layer.weight));
  const auto before = values(layer.weight);
  opt.zero_grad();
  layer(x.to(kFloat64)).sum().backward();
  opt.step();  // follows the forwarding records and moves its state to Float64
  EXPECT_NE(values(layer.weight), before);
  EXPECT_EQ(opt.param_groups()[0].params[0].dtype(), kFloat64);
  EXPECT_EQ(opt.state(0, 0).buffers.at("momentum_buffer").dtype(), kFloat64);
}

TEST(Module, PrintsATreeLikePyTorch) {
  nn::Sequential seq{std::make_shared<nn::Linear>(784, 512), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(512, 10, false)};
  EXPECT_EQ(seq.repr(),
            "Sequential(\n"
            "  (0): Linear(in_features=784, out_features=512, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Dropout(p=0.2, inplace=False)\n"
            "  (3): Linear(in_features=512, out_features=10, bias=False)\n"
            ")");
  EXPECT_EQ(nn::Conv2d(1, 32, 3, {.padding = {1, 1}}).repr(),
            "Conv2d(1, 32, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
}

TEST(Module, InitialisationMatchesPyTorch) {
  // torch.manual_seed(0); torch.nn.Linear(3, 2): kaiming_uniform_(a=sqrt(5)) then the bias.
  manual_seed(0);
  nn::Linear linear(3, 2);
  EXPECT_TRUE(values_near(linear.weight, {-0.004322517663240433, 0.3097158372402191, -0.4751853346824646,
                                          -0.4248946011066437, -0.2223689705133438, 0.15482072532176971}, 1e-7));
  EXPECT_TRUE(values_near(linear.bias, {-0.011439144611358643, 0.45777493715286255}, 1e-7));
  manual_seed(0);
  nn::Conv2d conv(2, 2, 2);
  EXPECT_TRUE(values_near(conv.weight.flatten().narrow(0, 0, 4),
                          {-0.0026469905860722065, 0.18966144323349, -0.2909903824329376, -0.26019373536109924}, 1e-7));
  EXPECT_TRUE(values_near(conv.bias, {0.13977210223674774, 0.21214008331298828}, 1e-7));
  manual_seed(0);
  nn::Embedding emb(3, 2, 1);
  EXPECT_TRUE(values_near(emb.weight, {1.5409960746765137, -0.293428897857666, 0, 0, -1.0845223665237427,
                                       -1.3985954523086548}, 1e-6));
}

TEST(Module, EmbeddingPaddingRowGetsNoGradient) {
  nn::Embedding emb(4, 3, 0);
  emb(tensor({{0, 2}, {2, 0}})).sum().backward();
  EXPECT_TRUE(values_near(emb.weight.grad().select(0, 0), {0, 0, 0}));
  EXPECT_TRUE(values_near(emb.weight.grad().select(0, 2), {2, 2, 2}));
  EXPECT_TRUE(values_near(emb.weight.grad().select(0, 1), {0, 0, 0}));
}

TEST(Module, ZeroGradAndApply) {
  nn::Linear l(2, 2);
  l(ones({1, 2})).sum().backward();
  EXPECT_TRUE(l.weight.grad().defined());
  l.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(values_near(l.weight.grad(), {0, 0, 0, 0}));
  l.zero_grad();
  EXPECT_FALSE(l.weight.grad().defined());
  int visited = 0;
  l.apply([&](nn::Module&) { ++visited; });
  EXPECT_EQ(visited, 1);
}

TEST(Module, ContainersAndLosses) {
  nn::ModuleDict dict;
  dict.insert("encoder", std::make_shared<nn::Linear>(2, 2));
  EXPECT_TRUE(dict.contains("encoder"));
  EXPECT_EQ(dict.named_parameters()[0].first, "encoder.weight");
  nn::ModuleList list{std::make_shared<nn::Linear>(1, 1), std::make_shared<nn::Tanh>()};
  EXPECT_EQ(list.size(), 2u);
  EXPECT_EQ(list.named_parameters()[1].first, "0.bias");
  nn::CrossEntropyLoss ce({.label_smoothing = 0.1});
  const Tensor logits = tensor({{1., 2., 0.5}, {0.1, -1., 2.}, {0., 0., 0.}});
  EXPECT_TRUE(values_near(ce(logits, tensor({1, 2, 0})), {0.6638107417}, 1e-6));
  nn::MSELoss mse;
  EXPECT_TRUE(values_near(mse(tensor({1., 2.}), tensor({0., 4.})), {2.5}));
  nn::Flatten flat;
  EXPECT_EQ(flat(zeros({2, 3, 4})).sizes(), IntArrayRef({2, 12}));
}
