// tests/bench/bench_core.cpp — the core's hot paths beside their baselines:
//   creation paths (tensor copy, from_blob, as_tensor) vs memcpy into warm memory;
//   elementwise add vs memcpy (bytes moved per second);
//   the fixed cost of a 1-element op, with and without autograd recording;
//   a module call with and without hooks beside module.forward (Note [Module calls]).
// Run: build/tests/bench/bench_core [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <memory>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

// --- creation paths ---------------------------------------------------------------------------

void BM_Memcpy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> src(n, 1.0f), dst(n, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}
BENCHMARK(BM_Memcpy)->RangeMultiplier(10)->Range(1000, 10'000'000);

void BM_TensorCopy(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> src(n, 1.0f);
  for (auto _ : state) {
    Tensor t = tensor(src);
    benchmark::DoNotOptimize(t.raw_data_ptr());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * sizeof(float)));
}
BENCHMARK(BM_TensorCopy)->RangeMultiplier(10)->Range(1000, 10'000'000);

// copy_ between Float32 and BFloat16 (autocast's casts of a weight and of its gradient), fc1's
// weight of the CNN: bytes are those of the Float32 side, as BM_Memcpy's of its buffer.
void BM_CopyConvertingDtype(benchmark::State& state) {
  const bool to_bfloat16 = state.range(0) == 1;
  const Tensor from = randn({128, 3136}).to(to_bfloat16 ? kFloat32 : kBFloat16);
  const Tensor to = empty({128, 3136}, to_bfloat16 ? kBFloat16 : kFloat32);
  for (auto _ : state) to.copy_(from);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * 128 * 3136 * 4);
}
BENCHMARK(BM_CopyConvertingDtype)->ArgName("to_bfloat16")->Arg(0)->Arg(1)->UseRealTime();

void BM_FromBlob(benchmark::State& state) {
  const auto n = static_cast<std::int64_t>(state.range(0));
  auto src = std::make_shared<std::vector<float>>(static_cast<std::size_t>(n), 1.0f);
  for (auto _ : state) {
    Tensor t = from_blob(src->data(), {n}, src);
    benchmark::DoNotOptimize(t.raw_data_ptr());
  }
}
BENCHMARK(BM_FromBlob)->RangeMultiplier(10)->Range(1000, 10'000'000);

void BM_AsTensorSharedVector(benchmark::State& state) {
  auto src = std::make_shared<std::vector<float>>(static_cast<std::size_t>(state.range(0)), 1.0f);
  for (auto _ : state) {
    Tensor t = as_tensor(src);
    benchmark::DoNotOptimize(t.raw_data_ptr());
  }
}
BENCHMARK(BM_AsTensorSharedVector)->RangeMultiplier(10)->Range(1000, 10'000'000);

void BM_AsTensorSameTensor(benchmark::State& state) {
  Tensor x = ones({state.range(0)});
  for (auto _ : state) benchmark::DoNotOptimize(as_tensor(x).raw_data_ptr());
}
BENCHMARK(BM_AsTensorSameTensor)->Arg(1000)->Arg(10'000'000);

void BM_Empty(benchmark::State& state) {
  for (auto _ : state) {
    Tensor t = empty({state.range(0)});
    benchmark::DoNotOptimize(t.raw_data_ptr());
  }
}
BENCHMARK(BM_Empty)->Arg(1)->Arg(1000);

// --- elementwise ------------------------------------------------------------------------------

void BM_AddMemcpyBaseline(benchmark::State& state) {
  // add reads two arrays and writes one: the baseline moves the same 3n floats with memcpy.
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n), d(n);
  for (auto _ : state) {
    std::memcpy(c.data(), a.data(), n * sizeof(float));
    std::memcpy(d.data(), b.data(), n * sizeof(float) / 2);
    benchmark::DoNotOptimize(c.data());
    benchmark::DoNotOptimize(d.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * 3 * n * sizeof(float)));
}
BENCHMARK(BM_AddMemcpyBaseline)->Arg(10'000'000)->UseRealTime();

void BM_Add(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  Tensor a = ones({n}), b = ones({n});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 3 * n * static_cast<std::int64_t>(sizeof(float)));
}
BENCHMARK(BM_Add)->Arg(1000)->Arg(1'000'000)->Arg(10'000'000)->UseRealTime();

void BM_AddBroadcastRow(benchmark::State& state) {
  Tensor a = ones({1000, 1000}), b = ones({1000});
  for (auto _ : state) {
    Tensor c = a + b;
    benchmark::DoNotOptimize(c.raw_data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 2 * 1'000'000 * static_cast<std::int64_t>(sizeof(float)));
}
BENCHMARK(BM_AddBroadcastRow)->UseRealTime();

// where() on a random mask (ReLU-like data): a branch per element would mispredict half the
// time; compare with the multiply by the same mask, which reads the same bytes.
// GELU forward and backward on a feed-forward layer's activation (4096 x 512): with the fused
// one-pass gelu_backward; with the backward written as ten elementwise ops (what the fused one
// replaced); and ReLU's forward and threshold_backward, the two-pass floor without erf and exp.
template <bool Relu>
void BM_ActivationForwardBackward(benchmark::State& state) {
  const Tensor x = randn({4096, 512}, TensorOptions().requires_grad(true)), g = randn({4096, 512});
  for (auto _ : state) {
    const Tensor y = Relu ? x.relu() : x.gelu();
    benchmark::DoNotOptimize(autograd::grad(TensorList{y}, TensorList{x}, TensorList{g}));
  }
}
BENCHMARK(BM_ActivationForwardBackward<false>)->Name("BM_GeluForwardBackward")->UseRealTime();
BENCHMARK(BM_ActivationForwardBackward<true>)->Name("BM_ReluForwardBackward")->UseRealTime();

void BM_GeluForwardBackwardAsOps(benchmark::State& state) {
  const Tensor x = randn({4096, 512}), g = randn({4096, 512});
  for (auto _ : state) {
    benchmark::DoNotOptimize(x.gelu());
    const Tensor cdf = 0.5 * (1 + (x * std::numbers::sqrt2 / 2).erf());
    const Tensor pdf = (x * x * -0.5).exp() * (1.0 / std::sqrt(2.0 * std::numbers::pi));
    benchmark::DoNotOptimize(g * (cdf + x * pdf));
  }
}
BENCHMARK(BM_GeluForwardBackwardAsOps)->UseRealTime();

void BM_WhereRandomMask(benchmark::State& state) {
  manual_seed(0);
  const Tensor mask = randn({1'000'000}) > 0, x = randn({1'000'000});
  for (auto _ : state) {
    Tensor y = where(mask, x, 0.0);
    benchmark::DoNotOptimize(y.raw_data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 1'000'000 * static_cast<std::int64_t>(2 * sizeof(float) + 1));
}
BENCHMARK(BM_WhereRandomMask)->UseRealTime();

void BM_MulByMaskBaseline(benchmark::State& state) {
  manual_seed(0);
  const Tensor mask = randn({1'000'000}) > 0, x = randn({1'000'000});
  for (auto _ : state) {
    Tensor y = x * mask;
    benchmark::DoNotOptimize(y.raw_data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 1'000'000 * static_cast<std::int64_t>(2 * sizeof(float) + 1));
}
BENCHMARK(BM_MulByMaskBaseline)->UseRealTime();

// --- per-op overhead ----------------------------------------------------------------------------

void BM_OneElementAdd(benchmark::State& state) {
  Tensor a = ones({1}), b = ones({1});
  for (auto _ : state) benchmark::DoNotOptimize((a + b).raw_data_ptr());
}
BENCHMARK(BM_OneElementAdd);

void BM_OneElementAddRecorded(benchmark::State& state) {
  Tensor a = ones({1}, requires_grad()), b = ones({1});
  for (auto _ : state) benchmark::DoNotOptimize((a + b).raw_data_ptr());
}
BENCHMARK(BM_OneElementAddRecorded);

void BM_AddSumBackward(benchmark::State& state) {
  Tensor a = ones({1}, requires_grad()), b = ones({1}, requires_grad());
  for (auto _ : state) {
    (a + b).sum().backward();
  }
}
BENCHMARK(BM_AddSumBackward);

// A module call's fixed cost (Note [Module calls]): module(x) with no hook registered beside
// its baseline module.forward(x), then with one forward hook, then after removing it (the
// branch-free path again). A 1x1 Linear, so the call's own cost is what is measured.
enum class ModuleCall { Forward, Call, CallWithHook, CallAfterRemove };
template <ModuleCall How>
void BM_LinearCall(benchmark::State& state) {
  nn::Linear fc(1, 1);
  const Tensor x = ones({1, 1});
  NoGradGuard no_grad;
  nn::RemovableHandle hook;
  if constexpr (How == ModuleCall::CallWithHook || How == ModuleCall::CallAfterRemove) {
    hook = fc.register_forward_hook([](nn::Module&, const TensorList&, const TensorList&) {});
  }
  if constexpr (How == ModuleCall::CallAfterRemove) hook.remove();
  for (auto _ : state) {
    if constexpr (How == ModuleCall::Forward) {
      benchmark::DoNotOptimize(fc.forward(x).raw_data_ptr());
    } else {
      benchmark::DoNotOptimize(fc(x).raw_data_ptr());
    }
  }
}
BENCHMARK(BM_LinearCall<ModuleCall::Forward>)->Name("BM_LinearForwardBaseline");
BENCHMARK(BM_LinearCall<ModuleCall::Call>)->Name("BM_LinearCallNoHooks");
BENCHMARK(BM_LinearCall<ModuleCall::CallWithHook>)->Name("BM_LinearCallOneForwardHook");
BENCHMARK(BM_LinearCall<ModuleCall::CallAfterRemove>)->Name("BM_LinearCallHookRemoved");

}  // namespace
