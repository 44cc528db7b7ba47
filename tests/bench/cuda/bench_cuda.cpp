// tests/bench/cuda/bench_cuda.cpp — GPU benchmarks, each beside a baseline in the same
// binary: Kiln's matmul beside a raw cublasGemmEx of the same shape (Float32 and Float16,
// n = 1024, 4096, 8192), elementwise add beside a device-to-device cudaMemcpy of the same
// bytes, host-to-device copies from pinned and from pageable memory, and one CNN training
// step at batch 512. Times are measured with CUDA events around the timed region (manual
// time), so they are device times, not launch times. Without a GPU each benchmark reports
// "CUDA not available" and skips.
//   build/tests/bench/bench_cuda --benchmark_filter=Matmul
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "../../../examples/support/models.h"
#include "kiln.h"

namespace {

using namespace kiln;

bool skip_without_gpu(benchmark::State& state) {
  if (cuda::is_available()) return false;
  state.SkipWithError("CUDA not available");
  return true;
}

/// Times `body` on the current stream with events; reports milliseconds per iteration.
template <class F>
void time_on_device(benchmark::State& state, F body) {
  body();  // warm up (allocations, cuBLAS heuristics)
  cuda::synchronize();
  for (auto _ : state) {
    cuda::Event start(true), stop(true);
    start.record();
    body();
    stop.record();
    stop.synchronize();
    state.SetIterationTime(start.elapsed_time(stop) / 1000.0);
  }
}

void set_flops(benchmark::State& state, double n) {
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * static_cast<double>(state.iterations()) / 1e12, benchmark::Counter::kIsRate);
}

void BM_KilnMatmul(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t n = state.range(0);
  const DType type = state.range(1) == 16 ? kHalf : kFloat32;
  Tensor a = randn({n, n}, Device("cuda")).to(type), b = randn({n, n}, Device("cuda")).to(type);
  Tensor c;
  time_on_device(state, [&] { c = matmul(a, b); });
  set_flops(state, static_cast<double>(n));
}

void BM_RawCublasGemm(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  const std::int64_t n = state.range(0);
  const bool half = state.range(1) == 16;
  const cudaDataType_t type = half ? CUDA_R_16F : CUDA_R_32F;
  const std::size_t bytes = static_cast<std::size_t>(n * n) * (half ? 2 : 4);
  void *a = nullptr, *b = nullptr, *c = nullptr;
  cudaMalloc(&a, bytes);
  cudaMalloc(&b, bytes);
  cudaMalloc(&c, bytes);
  cudaMemset(a, 0, bytes);
  cudaMemset(b, 0, bytes);
  cublasHandle_t handle = nullptr;
  cublasCreate(&handle);
  cublasSetStream(handle, static_cast<cudaStream_t>(cuda::current_stream().handle()));
  const float alpha = 1.0f, beta = 0.0f;
  const int ni = static_cast<int>(n);
  // Kiln's defaults: Float32 without TF32, Float16 accumulating in Float32.
  time_on_device(state, [&] {
    cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, ni, ni, ni, &alpha, b, type, ni, a, type, ni, &beta, c, type, ni,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  set_flops(state, static_cast<double>(n));
  cublasDestroy(handle);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

void matmul_shapes(benchmark::internal::Benchmark* b) {
  for (int bits : {32, 16}) {
    for (int n : {1024, 4096, 8192}) b->Args({n, bits});
  }
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_RawCublasGemm)->Apply(matmul_shapes);
BENCHMARK(BM_KilnMatmul)->Apply(matmul_shapes);

constexpr std::int64_t kAddElements = std::int64_t{1} << 26;

void BM_KilnAdd(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = ones({kAddElements}, Device("cuda")), b = ones({kAddElements}, Device("cuda"));
  Tensor c;
  time_on_device(state, [&] { c = a + b; });
  state.SetBytesProcessed(state.iterations() * kAddElements * 4 * 3);  // read a, b; write c
}
BENCHMARK(BM_KilnAdd)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_MemcpyDeviceToDevice(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  Tensor a = ones({kAddElements}, Device("cuda")), c = empty({kAddElements}, Device("cuda"));
  auto stream = static_cast<cudaStream_t>(cuda::current_stream().handle());
  time_on_device(state, [&] {
    cudaMemcpyAsync(c.raw_data_ptr(), a.raw_data_ptr(), static_cast<std::size_t>(kAddElements) * 4,
                    cudaMemcpyDeviceToDevice, stream);
  });
  state.SetBytesProcessed(state.iterations() * kAddElements * 4 * 2);  // read + write
}
BENCHMARK(BM_MemcpyDeviceToDevice)->UseManualTime()->Unit(benchmark::kMillisecond);

void host_to_device(benchmark::State& state, bool pinned) {
  if (skip_without_gpu(state)) return;
  const std::int64_t n = std::int64_t{1} << 26;  // 256 MiB of Float32
  Tensor host = pinned ? ones({n}).pin_memory() : ones({n});
  Tensor device;
  time_on_device(state, [&] { device = host.to(Device("cuda"), /*non_blocking=*/pinned); });
  state.SetBytesProcessed(state.iterations() * n * 4);
}
void BM_HostToDevicePinned(benchmark::State& state) { host_to_device(state, true); }
void BM_HostToDevicePageable(benchmark::State& state) { host_to_device(state, false); }
BENCHMARK(BM_HostToDevicePinned)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HostToDevicePageable)->UseManualTime()->Unit(benchmark::kMillisecond);

// Argument cudnn: 1 takes the op-kernel route (cuDNN convolution, pooling, batch norm), 0 the
// composite route over Kiln's kernels and cuBLAS (unfold + GEMM): each is the other's baseline.
void BM_CnnTrainingStepFloat32(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  backends::OpKernelsGuard route(DeviceType::CUDA, state.range(0) != 0);
  manual_seed(0);
  examples::Cnn cnn;
  cnn.to(Device("cuda"));
  Tensor x = rand({512, 1, 28, 28}, Device("cuda"));
  Tensor y = randint(0, 10, {512}, Device("cuda"));
  optim::SGD sgd(cnn.parameters(), optim::SGDOptions(0.01).momentum(0.9));
  time_on_device(state, [&] {
    sgd.zero_grad();
    nn::functional::cross_entropy(cnn.forward(x), y).backward();
    sgd.step();
  });
}
BENCHMARK(BM_CnnTrainingStepFloat32)->ArgName("cudnn")->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond);

// conv2d forward and backward on [128, 64, 56, 56] with a 3x3x64 kernel, padding 1.
void BM_Conv2dForwardBackward(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  backends::OpKernelsGuard route(DeviceType::CUDA, state.range(0) != 0);
  manual_seed(0);
  const Tensor x = randn({128, 64, 56, 56}, TensorOptions().device(Device("cuda")).requires_grad(true));
  const Tensor w = randn({64, 64, 3, 3}, TensorOptions().device(Device("cuda")).requires_grad(true));
  time_on_device(state, [&] { conv2d(x, w, {}, {1, 1}, {1, 1}).sum().backward(); });
  // forward, input gradient and weight gradient: each 2 * N * O * H * W * C * kh * kw flops
  const double flops = 3 * 2.0 * 128 * 64 * 56 * 56 * 64 * 9;
  state.counters["TFLOP/s"] =
      benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e12, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Conv2dForwardBackward)->ArgName("cudnn")->Arg(1)->Arg(0)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
