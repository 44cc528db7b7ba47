// tests/amp/test_autocast.cpp — autocast on the CPU (BFloat16): each policy's output dtype,
// nesting and thread-locality, differentiable casts that bring Float32 grads to Float32
// parameters, the per-region cast cache, and a small model trained under autocast that
// matches Float32 training's accuracy.
#include <iostream>
#include <thread>

#include "support/test_util.h"

using namespace kiln;
using amp::autocast;

namespace {

TensorOptions param() { return TensorOptions().requires_grad(true); }

}  // namespace

TEST(Autocast, EachPolicyGivesItsDocumentedDtype) {
  manual_seed(0);
  const Tensor x = randn({4, 8});
  const Tensor w = randn({3, 8}, param());
  const Tensor b = randn({3}, param());
  const Tensor image = randn({2, 3, 6, 6});
  const Tensor kernel = randn({4, 3, 3, 3}, param());
  const Tensor target = tensor(std::vector<std::int64_t>{0, 1, 2, 0});
  autocast guard(DeviceType::CPU);
  // LowerPrecision
  const Tensor y = linear(x, w, b);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(matmul(x, w.t()).dtype(), kBFloat16);
  EXPECT_EQ(x.mm(w.t()).dtype(), kBFloat16);
  EXPECT_EQ(addmm(b, x, w.t()).dtype(), kBFloat16);
  EXPECT_EQ(conv2d(image, kernel).dtype(), kBFloat16);
  // pass-through: runs in what it is given
  EXPECT_EQ(y.relu().dtype(), kBFloat16);
  EXPECT_EQ(max_pool2d(conv2d(image, kernel), {2, 2}).dtype(), kBFloat16);
  // Fp32
  EXPECT_EQ(y.exp().dtype(), kFloat32);
  EXPECT_EQ(y.log_softmax(1).dtype(), kFloat32);
  EXPECT_EQ(y.softmax(1).dtype(), kFloat32);
  EXPECT_EQ(y.sum().dtype(), kFloat32);
  EXPECT_EQ(y.mean().dtype(), kFloat32);
  EXPECT_EQ(y.pow(2).dtype(), kFloat32);
  EXPECT_EQ(cross_entropy(y, target).dtype(), kFloat32);
  EXPECT_EQ(mse_loss(y, y.detach()).dtype(), kFloat32);
  EXPECT_EQ(layer_norm(y, {3}).dtype(), kFloat32);
  // batch_norm: Float32 statistics, output in the input's dtype
  const Tensor running_mean = zeros({4}), running_var = ones({4});
  const Tensor bn = batch_norm(conv2d(image, kernel), running_mean, running_var, {}, {}, true, 0.1, 1e-5);
  EXPECT_EQ(bn.dtype(), kBFloat16);
  EXPECT_EQ(running_mean.dtype(), kFloat32);
  EXPECT_GT(running_mean.abs().sum().item<float>(), 0.0f) << "running stats were updated in place";
  // Promote: mixed inputs run in the widest
  EXPECT_EQ((y + ones({3})).dtype(), kFloat32);
  EXPECT_EQ((y * y).dtype(), kBFloat16);
  EXPECT_EQ(cat({y, ones({4, 3})}, 0).dtype(), kFloat32);
  EXPECT_EQ(stack({y, ones({4, 3})}).dtype(), kFloat32);
  EXPECT_EQ(cat({y, y}, 0).dtype(), kBFloat16);
  // A wrapped number is no tensor to promote with.
  EXPECT_EQ((y * 0.5).dtype(), kBFloat16);
  // Float64 is never cast, nor integer tensors.
  EXPECT_EQ(matmul(x.to(kFloat64), w.t().to(kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(target.sum().dtype(), kInt64);
}

TEST(Autocast, OnlyTheRegionsDeviceTypeIsAffected) {
  const Tensor x = randn({2, 2});
  autocast cuda_region(DeviceType::CUDA);
  EXPECT_TRUE(amp::is_autocast_enabled(DeviceType::CUDA));
  EXPECT_EQ(amp::get_autocast_dtype(DeviceType::CUDA), kFloat16);
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(x.mm(x).dtype(), kFloat32) << "a CUDA region leaves CPU ops alone";
}

TEST(Autocast, NestingRestoresTheOuterStateAndDisabledRegionsRunInFloat32) {
  const Tensor x = randn({2, 2});
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  {
    autocast outer(DeviceType::CPU);
    EXPECT_EQ(x.mm(x).dtype(), kBFloat16);
    {
      autocast off(DeviceType::CPU, false);
      EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
      EXPECT_EQ(x.mm(x).dtype(), kFloat32);
      {
        autocast half(DeviceType::CPU, kFloat16);
        EXPECT_EQ(x.mm(x).dtype(), kFloat16);
      }
      EXPECT_EQ(x.mm(x).dtype(), kFloat32);
    }
    EXPECT_EQ(x.mm(x).dtype(), kBFloat16);
    EXPECT_EQ(amp::get_autocast_dtype(DeviceType::CPU), kBFloat16);
  }
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(x.mm(x).dtype(), kFloat32);
  EXPECT_FALSE(amp::detail::pending()) << "after the regions, ops take the fast path again";
}

TEST(Autocast, StateIsThreadLocal) {
  const Tensor x = randn({2, 2});
  autocast guard(DeviceType::CPU);
  DType other_thread_dtype = kBool;
  bool other_thread_enabled = true;
  std::thread([&] {
    other_thread_enabled = amp::is_autocast_enabled(DeviceType::CPU);
    other_thread_dtype = x.mm(x).dtype();
  }).join();
  EXPECT_FALSE(other_thread_enabled);
  EXPECT_EQ(other_thread_dtype, kFloat32);
  EXPECT_EQ(x.mm(x).dtype(), kBFloat16);
}

TEST(Autocast, UnsupportedDtypesAndDevicesAreErrors) {
  EXPECT_ERROR(autocast(DeviceType::CPU, kFloat32),
               "In CPU autocast, but the target dtype is not supported: autocast runs ops in "
               "Float16 or BFloat16, got kiln.float32");
  EXPECT_ERROR(autocast(DeviceType::Meta), "User specified an unsupported autocast device_type 'meta'");
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::CPU)) << "a refused guard leaves no state behind";
}

TEST(Autocast, CastsAreDifferentiableSoFloat32ParametersGetFloat32Grads) {
  manual_seed(1);
  const Tensor x = randn({16, 8});
  const Tensor target = randint(0, 4, {16});
  const Tensor w = randn({4, 8}, param());
  const Tensor b = zeros({4}, param());
  Tensor loss;
  {
    autocast guard(DeviceType::CPU);
    loss = cross_entropy(linear(x, w, b), target);
  }
  loss.backward();
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  ASSERT_EQ(b.grad().dtype(), kFloat32);
  // The same gradient in Float32 throughout, to BFloat16's precision (8 mantissa bits).
  const Tensor w32 = w.detach().clone().as_leaf();
  const Tensor b32 = b.detach().clone().as_leaf();
  cross_entropy(linear(x, w32, b32), target).backward();
  EXPECT_TRUE(allclose(w.grad(), w32.grad(), 2e-2, 1e-2)) << w.grad() << "\n" << w32.grad();
  EXPECT_TRUE(allclose(b.grad(), b32.grad(), 2e-2, 1e-2));
  EXPECT_FALSE(allclose(w.grad(), w32.grad(), 0.0, 1e-7)) << "the BFloat16 run should differ a little";
}

TEST(Autocast, EachParameterIsCastOncePerRegion) {
  const Tensor w = randn({4, 8}, param());
  const Tensor x1 = randn({2, 8}), x2 = randn({2, 8}), x3 = randn({2, 8});
  {
    autocast guard(DeviceType::CPU);
    const std::int64_t before = amp::autocast_cast_count();
    const Tensor y1 = linear(x1, w);
    const Tensor y2 = linear(x2, w);
    const Tensor y3 = linear(x3, w);
    // three activations cast, the weight once
    EXPECT_EQ(amp::autocast_cast_count() - before, 4);
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
    {
      autocast nested(DeviceType::CPU, false);
    }
    EXPECT_EQ(amp::autocast_cache_size(), 1u) << "only the outermost exit clears the cache";
    // An in-place update of the parameter makes the cached cast stale: it is cast again.
    {
      NoGradGuard no_grad;
      w.sub_(ones_like(w));
    }
    const std::int64_t after_update = amp::autocast_cast_count();
    const Tensor y4 = linear(x1, w);
    EXPECT_EQ(amp::autocast_cast_count() - after_update, 2);
    EXPECT_TRUE(allclose(y4.to(kFloat32), linear(x1.to(kBFloat16), w.to(kBFloat16)).to(kFloat32)));
    (y1.sum() + y2.sum() + y3.sum()).backward();
  }
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
  // the three uses of the one cached cast all reach the parameter
  const Tensor expected = ones({2, 4}).t().mm(x1 + x2 + x3);
  EXPECT_TRUE(allclose(w.grad(), expected, 2e-2, 5e-2)) << w.grad() << "\n" << expected;
}

TEST(Autocast, TrainingUnderCpuAutocastMatchesFloat32Accuracy) {
  // Ten overlapping Gaussian classes in 32 dims: hard enough that accuracy is below 100%, so
  // a real difference between the two runs could show.
  manual_seed(7);
  const std::int64_t classes = 10, dims = 32, train_n = 4000, test_n = 4000;
  const Tensor centres = randn({classes, dims}) * 0.6;
  auto sample = [&](std::int64_t n) {
    Tensor labels = randint(0, classes, {n});
    Tensor points = centres.index_select(0, labels) + randn({n, dims});
    return std::make_pair(points, labels);
  };
  const auto [train_x, train_y] = sample(train_n);
  const auto [test_x, test_y] = sample(test_n);

  auto train = [&](bool use_autocast) {
    manual_seed(11);
    nn::Sequential model({std::make_shared<nn::Linear>(dims, 64), std::make_shared<nn::ReLU>(),
                          std::make_shared<nn::Linear>(64, classes)});
    optim::SGD opt(model.parameters(), optim::SGDOptions(0.05).momentum(0.9));
    for (int epoch = 0; epoch < 5; ++epoch) {
      for (std::int64_t i = 0; i < train_n; i += 100) {
        const Tensor xb = train_x.narrow(0, i, 100), yb = train_y.narrow(0, i, 100);
        Tensor loss;
        {
          autocast guard(DeviceType::CPU, use_autocast);
          loss = cross_entropy(model.forward(xb), yb);
        }
        opt.zero_grad();
        loss.backward();
        opt.step();
      }
    }
    NoGradGuard no_grad;
    const Tensor predicted = model.forward(test_x).argmax(1);
    return 100.0 * (predicted == test_y).sum().item<std::int64_t>() / static_cast<double>(test_n);
  };
  const double fp32 = train(false);
  const double bf16 = train(true);
  EXPECT_GT(fp32, 60.0);
  EXPECT_LT(fp32, 99.0) << "the task should not be trivially separable";
  std::cout << "Float32 " << fp32 << "%, BFloat16 autocast " << bf16 << "%\n";
  EXPECT_NEAR(bf16, fp32, 0.5) << "Float32 " << fp32 << "%, BFloat16 autocast " << bf16 << "%";
}

TEST(Autocast, OnACpuWithoutNativeBFloat16ItSaysOnceThatItSavesMemoryNotTime) {
  std::vector<std::string> warnings;
  auto previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  reset_warnings_given();
  for (int i = 0; i < 3; ++i) {
    autocast region(DeviceType::CPU);
    (void)matmul(ones({4, 4}), ones({4, 4}));
  }
  { autocast cuda_region(DeviceType::CUDA); }  // only the CPU's regions concern the CPU's kernels
  set_warning_handler(previous);
  if (backends::onednn_has_bf16()) {
    EXPECT_TRUE(warnings.empty());  // oneDNN runs BFloat16 natively here
  } else {
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_NE(warnings[0].find("CPU autocast to BFloat16: this CPU has no native BFloat16 kernels"),
              std::string::npos);
    EXPECT_NE(warnings[0].find("saves activation memory here, not time"), std::string::npos);
  }
}
