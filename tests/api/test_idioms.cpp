// tests/api/test_idioms.cpp — PyTorch habits, written the way a PyTorch (or LibTorch) user
// writes them. These tests are first of all compile checks: a change that breaks one of these
// idioms breaks CI's build. Each also asserts what the idiom computes.
#include <gtest/gtest.h>

#include <tuple>

#include "kiln.h"
#include "support/test_util.h"

namespace {

using namespace kiln;
namespace F = kiln::nn::functional;
using kiln::testing::values;

TEST(Idioms, OptimizerOptionSettersChainInTheirOwnType) {
  nn::Linear model(4, 2);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions(1e-3).weight_decay(0.05).betas({0.8, 0.9}));
  optim::Adam adam(model.parameters(), optim::AdamOptions(1e-3).amsgrad(true));
  optim::SGD sgd(model.parameters(), optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
  const auto& o = static_cast<const optim::AdamWOptions&>(*opt.param_groups()[0].options);
  EXPECT_EQ(o.weight_decay_, 0.05);
  EXPECT_EQ(o.betas_.first, 0.8);
}

TEST(Idioms, SizesAreAnIntegerABracedListOrAnArray) {
  const Tensor x = arange(0.0, 32.0).reshape({1, 2, 4, 4});
  const Tensor a = max_pool2d(x, {2, 2}, {2, 2});
  const Tensor b = max_pool2d(x, 2);
  const Tensor c = F::max_pool2d(x, std::array<std::int64_t, 2>{2, 2});
  EXPECT_EQ(a.sizes(), (Shape{1, 2, 2, 2}));
  EXPECT_TRUE(equal(a, b));
  EXPECT_TRUE(equal(a, c));
  EXPECT_EQ(values(b.flatten()), (std::vector<double>{5, 7, 13, 15, 21, 23, 29, 31}));
  EXPECT_EQ(avg_pool2d(x, 2).sizes(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(avg_pool2d(x, {3, 3}, 1, 1).sizes(), (Shape{1, 2, 4, 4}));  // kernel 3, stride 1, padding 1
  nn::Conv2d conv(2, 3, 3, nn::Conv2dOptions{.stride = 1, .padding = 1});
  EXPECT_EQ(conv.forward(x).sizes(), (Shape{1, 3, 4, 4}));
  EXPECT_EQ(F::conv2d(x, conv.weight, conv.bias, 2, 1).sizes(), (Shape{1, 3, 2, 2}));
  nn::MaxPool2d pool(2);
  EXPECT_TRUE(equal(pool.forward(x), b));
}

TEST(Idioms, FunctionalSignaturesTakePyTorchsOrder) {
  const Tensor weight = arange(0.0, 6.0).reshape({3, 2});
  const Tensor indices = tensor({2, 0});
  EXPECT_EQ(values(F::embedding(indices, weight)), (std::vector<double>{4, 5, 0, 1}));
  EXPECT_EQ(values(F::leaky_relu(tensor({-2.0, 3.0}), 0.1)), (std::vector<double>{-0.2f, 3}));
}

TEST(Idioms, ResultsWithSeveralPartsAreNamed) {
  const Tensor x = tensor({{3.0, 1.0, 2.0}, {0.5, 4.0, 4.0}});
  const auto [values_, indices] = x.max(1);
  EXPECT_EQ(values(values_), (std::vector<double>{3, 4}));
  EXPECT_EQ(values(indices), (std::vector<double>{0, 1}));
  EXPECT_EQ(values(x.min(1).values), (std::vector<double>{1, 0.5}));
  const std::tuple<Tensor, Tensor> as_tuple = x.max(1);  // LibTorch code keeps working
  EXPECT_EQ(values(std::get<1>(as_tuple)), (std::vector<double>{0, 1}));

  const auto sorted = x.sort(1, /*descending=*/true);
  EXPECT_EQ(values(sorted.values), (std::vector<double>{3, 2, 1, 4, 4, 0.5}));
  EXPECT_EQ(values(sorted.indices), (std::vector<double>{0, 2, 1, 1, 2, 0}));  // ties keep their order
  const auto top = x.topk(2);
  EXPECT_EQ(values(top.values), (std::vector<double>{3, 2, 4, 4}));
  const auto [kth, kth_index] = x.kthvalue(2, 1);
  EXPECT_EQ(values(kth), (std::vector<double>{2, 4}));
  EXPECT_EQ(values(kth_index), (std::vector<double>{2, 1}));
  const auto [std_dev, mean] = std_mean(tensor({1.0, 2.0, 3.0, 4.0}));
  EXPECT_NEAR(std_dev.item<double>(), 1.2909944487358056, 1e-6);
  EXPECT_EQ(mean.item<double>(), 2.5);
  const auto vm = var_mean(x, {1}, /*unbiased=*/false);
  EXPECT_NEAR(vm.var[0].item<double>(), 2.0 / 3.0, 1e-6);
}

TEST(Idioms, ReductionsTakeOneDimOrAList) {
  const Tensor x = arange(1.0, 7.0).reshape({2, 3});
  EXPECT_EQ(values(x.prod(1)), (std::vector<double>{6, 120}));
  EXPECT_EQ(x.prod({0, 1}).item<double>(), 720.0);
  EXPECT_EQ(values(x.sum(1)), (std::vector<double>{6, 15}));
  EXPECT_EQ(values(x.sum({0, 1}, true)), std::vector<double>{21});
  EXPECT_EQ(values(x.mean(0)), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(values(x.amax(1)), (std::vector<double>{3, 6}));
  EXPECT_EQ(values(x.logsumexp(1) - x.logsumexp({1})), (std::vector<double>{0, 0}));
}

TEST(Idioms, StateDictEditsInALine) {
  nn::Sequential model({std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(3, 2)});
  StateDict sd = model.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  sd["backbone.weight"] = sd.pop("0.weight");  // rename
  EXPECT_EQ(sd.erase("2.weight"), 1u);          // drop the head
  EXPECT_EQ(sd.erase("2.weight"), 0u);
  EXPECT_TRUE(sd.contains("backbone.weight"));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"0.bias", "2.bias", "backbone.weight"}));
  EXPECT_EQ(sd.values().size(), 3u);
  for (const auto& [name, t] : sd.items()) EXPECT_TRUE(t.defined()) << name;

  // A backbone into a model with a new head: strict = false says what did not match.
  nn::Sequential fresh({std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(3, 5)});
  StateDict backbone = model.state_dict();
  backbone.erase("2.weight");
  backbone.erase("2.bias");
  const nn::IncompatibleKeys result = fresh.load_state_dict(backbone, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"2.weight", "2.bias"}));
  EXPECT_TRUE(result.unexpected_keys.empty());
  EXPECT_TRUE(equal(fresh.state_dict().at("0.weight"), model.state_dict().at("0.weight")));
}

// The Kiln column of docs/pytorch-to-kiln.md's creation, loop and data rows.
TEST(Idioms, TheTranslationTablesRowsCompile) {
  manual_seed(0);
  const Tensor a = arange(0, 10);
  EXPECT_EQ(a.dtype(), kInt64);
  const Tensor w = zeros({3}, requires_grad());
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());
  EXPECT_EQ(tensor({1.0, 2.0}).dtype(), kFloat32);
  const Tensor state = get_rng_state();
  const Tensor r = randn({2, 3}, kFloat64);
  set_rng_state(state);
  EXPECT_TRUE(equal(randn({2, 3}, kFloat64), r));
  const Tensor x = randn({2, 4, 5});
  EXPECT_TRUE(equal(x.slice(1, 1, 3), x.narrow(1, 1, 2)));
  EXPECT_EQ(x.select(1, 2).sizes(), (Shape{2, 5}));

  nn::Linear model(5, 3);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions(1e-3).weight_decay(0.05));
  optim::CosineAnnealingLR sched(opt, 10);
  auto loader_data = std::make_shared<data::TensorDataset>(randn({8, 5}), randint(0, 3, {8}));
  data::DataLoader loader(loader_data, {.batch_size = 4, .shuffle = true});
  amp::GradScaler scaler({.enabled = false});
  for (const data::Example& batch : loader) {
    opt.zero_grad();
    Tensor loss;
    {
      amp::autocast region(DeviceType::CPU);
      loss = cross_entropy(model.forward(batch.data), batch.target);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  }
  sched.step();
  {
    NoGradGuard no_grad;
    const Tensor pred = model.forward(loader_data->get_batch({0, 1, 2}).data).argmax(1);
    EXPECT_GE(pred.eq(loader_data->get_batch({0, 1, 2}).target).sum().item<std::int64_t>(), 0);
  }
  EXPECT_EQ(loader.state_dict().at("batches_yielded").item<std::int64_t>(), 2);
}

}  // namespace

namespace {

using namespace kiln::indexing;

// x.index({...}) is Python's x[...]; values checked against what Python prints.
TEST(Idioms, PythonIndexingWithSliceEllipsisAndNone) {
  const Tensor x = arange(0, 24).reshape({2, 3, 4});
  EXPECT_EQ(values(x.index({Slice(), Slice(1, 3), 0})), (std::vector<double>{4, 8, 16, 20}));  // x[:, 1:3, 0]
  EXPECT_EQ(x.index({0, Ellipsis, None}).sizes(), (Shape{3, 4, 1}));                         // x[0, ..., None]
  EXPECT_EQ(values(x.index({1, -1, Slice(None, None, 2)})), (std::vector<double>{20, 22}));   // x[1, -1, ::2]
  EXPECT_EQ(values(x.index({Ellipsis, 3})), (std::vector<double>{3, 7, 11, 15, 19, 23}));     // x[..., 3]
  EXPECT_EQ(values(x.index({0, tensor({2, 0})})), (std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3}));  // x[0, [2, 0]]
  EXPECT_EQ(x.index({Slice(-1)}).sizes(), (Shape{1, 3, 4}));                                   // x[-1:]
  // A view where Python's is one, and differentiable.
  Tensor y = zeros({2, 3}, dtype(kFloat64).requires_grad(true));
  (y.index({Slice(), 1}) * 2).sum().backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{0, 2, 0, 0, 2, 0}));
  EXPECT_ERROR(x.index({0, 0, 0, 0}), "too many indices for tensor of dimension 3");
  EXPECT_ERROR(x.index({Ellipsis, Ellipsis}), "an index can only have a single ellipsis");
  EXPECT_ERROR(x.index({x > 3}), "tensors used as indices must be 1-D Int64");
}

}  // namespace

namespace {

// The rows of docs/pytorch-to-kiln.md added by the second round of habits, as written there.
TEST(Idioms, SequenceLayersAndTensorMethodsAsTheDocsWriteThem) {
  manual_seed(0);
  nn::Linear model(4, 3);
  for (auto& p : model.parameters()) p.requires_grad_(false);
  EXPECT_EQ(model.num_parameters(/*trainable_only=*/true), 0);
  const Tensor x = arange(0.0, 10.0).reshape({2, 5});
  const TensorList ab = x.split({2, 3}, 1);
  EXPECT_EQ(values(ab[1].select(0, 0)), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(values(x.narrow(1, 0, 2).triu(1)), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(x.half().dtype(), kFloat16);

  nn::LSTM lstm(nn::LSTMOptions(5, 4).num_layers(2).batch_first(true));
  const Tensor seq = randn({3, 7, 5}), h0 = zeros({2, 3, 4}), c0 = zeros({2, 3, 4});
  auto [out, state] = lstm(seq, {h0, c0});
  auto [h, c] = state;
  // The last layer's h_n is its output at the last step.
  EXPECT_TRUE(kiln::testing::tensors_near(h.select(0, 1), out.select(1, -1), 0.0));
  EXPECT_EQ(c.sizes(), (Shape{2, 3, 4}));

  nn::TransformerEncoderLayer layer(8, 2, {.dim_feedforward = 16, .batch_first = true});
  nn::TransformerEncoder enc(layer, 2);
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  const Tensor src = randn({2, 4, 8});
  const Tensor mask = nn::generate_square_subsequent_mask(4);
  enc.eval();
  EXPECT_EQ(enc(src, mask).sizes(), (Shape{2, 4, 8}));
  auto [attended, weights] = mha(src, src, src, {.need_weights = false, .attn_mask = mask});
  EXPECT_EQ(attended.sizes(), (Shape{2, 4, 8}));
  EXPECT_FALSE(weights.defined());
}

}  // namespace
