// tests/core/test_cuda.cpp — the CUDA backend. Without a GPU every device test skips
// visibly (GTEST_SKIP), and what can be checked without one is: the build reports itself
// correctly and errors explain the missing driver or device. With a GPU: every op-table entry
// on CUDA against the CPU result for the same inputs (per-dtype tolerances), gradcheck in
// Float64 on CUDA, streams and events, copies (blocking, non_blocking from pinned memory,
// between devices), device-mismatch errors, and allocator invariants after every test.
#include <limits>
#include <thread>

#include "support/op_table.h"
#include "support/test_util.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const Device kCuda("cuda:0");

/// Device tests skip without a GPU and leave the caching allocator balanced: everything a
/// test allocated is freed by its end, and the books agree with themselves.
class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "CUDA not available";
    before_ = cuda::memory_allocated();
  }
  void TearDown() override {
    if (!cuda::is_available()) return;
    cuda::synchronize();
    const MemoryStats s = cuda::memory_stats();
    EXPECT_EQ(s.allocated_bytes.current, before_) << "a test leaked device memory";
    EXPECT_GE(s.reserved_bytes.current, s.allocated_bytes.current);
    EXPECT_GE(s.allocated_bytes.peak, s.allocated_bytes.current);
    EXPECT_EQ(s.allocated_bytes.allocated - s.allocated_bytes.freed, s.allocated_bytes.current);
  }
  std::int64_t before_ = 0;
};

TEST(CudaBuild, ReportsItselfAndExplainsAMissingDevice) {
  if (cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(cuda::device_count(), 0);
  try {
    (void)zeros({2}, Device("cuda"));
    FAIL() << "creating a CUDA tensor without a device must throw";
  } catch (const Error& e) {
    const std::string m = e.message();
    if (cuda::is_built()) {
      EXPECT_TRUE(m.find("Found no NVIDIA driver on your system") != std::string::npos ||
                  m.find("no CUDA-capable device is detected") != std::string::npos)
          << m;
    } else {
      EXPECT_NE(m.find("not compiled with CUDA enabled"), std::string::npos) << m;
    }
  }
  EXPECT_THROW((void)zeros({2}, pinned_memory(true)), Error);
  EXPECT_THROW((void)cuda::Stream::create(), Error);
  EXPECT_THROW((void)cuda::memory_allocated(), Error);
  cuda::empty_cache();  // harmless without a device, as in PyTorch
  cuda::set_allow_tf32(true);
  EXPECT_TRUE(cuda::allow_tf32());
  cuda::set_allow_tf32(false);
}

// --- the op table on CUDA ------------------------------------------------------------------

std::vector<const OpInfo*> deterministic_entries() {
  std::vector<const OpInfo*> out;
  for (const OpInfo& info : op_table()) {
    // Random ops draw from a different generator on each device.
    if (std::find(info.kernels.begin(), info.kernels.end(), "random") == info.kernels.end()) out.push_back(&info);
  }
  return out;
}

class CudaOpTable : public ::testing::TestWithParam<const OpInfo*> {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "CUDA not available";
  }
};

TEST_P(CudaOpTable, MatchesTheCpuInEveryDtype) {
  const OpInfo& op = *GetParam();
  for (const OpCase& c : op.cases) {
    for (DType dtype : op.dtypes) {
      SCOPED_TRACE(c.label + " in " + dtype_name(dtype));
      TensorList cpu_in, cuda_in;
      for (const InputSpec& s : c.inputs) {
        cpu_in.push_back(s.make(dtype));
        cuda_in.push_back(s.make(dtype, kCuda));
      }
      const Tensor expected = op.fn(cpu_in);
      const Tensor actual = op.fn(cuda_in);
      EXPECT_TRUE(actual.is_cuda());
      EXPECT_EQ(actual.dtype(), expected.dtype());
      EXPECT_TRUE(tensors_near(actual.to(kCPU), expected,
                               expected.is_floating_point() ? tolerance(expected.dtype()) : 0.0));
    }
  }
}

TEST_P(CudaOpTable, GradcheckInFloat64OnTheDevice) {
  const OpInfo& op = *GetParam();
  if (!op.differentiable) GTEST_SKIP() << op.name << " is not differentiable";
  for (const OpCase& c : op.cases) {
    if (!c.gradcheck) continue;
    SCOPED_TRACE(c.label);
    TensorList in;
    for (const InputSpec& s : c.inputs) {
      Tensor t = s.make(kFloat64, kCuda);
      in.push_back(s.kind == InputSpec::Kind::Float && s.differentiable ? t.as_leaf(true) : t);
    }
    EXPECT_TRUE(autograd::gradcheck(op.fn, in));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaOpTable, ::testing::ValuesIn(deterministic_entries()),
                         [](const ::testing::TestParamInfo<const OpInfo*>& info) { return info.param->name; });

// --- device, streams, events -----------------------------------------------------------------

TEST_F(Cuda, DeviceGuardAndCurrentDevice) {
  EXPECT_GE(cuda::device_count(), 1);
  {
    cuda::DeviceGuard guard(0);
    EXPECT_EQ(cuda::current_device(), 0);
  }
  EXPECT_ERROR(cuda::set_device(cuda::device_count()), "invalid device ordinal");
}

TEST_F(Cuda, StreamsOrderWorkAndEventsTimeIt) {
  cuda::Stream side = cuda::Stream::create();
  Tensor x = ones({1 << 20}, kCuda);
  Tensor y;
  cuda::Event start(/*enable_timing=*/true), stop(/*enable_timing=*/true);
  {
    cuda::StreamGuard on(side);
    EXPECT_EQ(cuda::current_stream(), side);
    start.record();
    y = (x * 2).sum();
    stop.record();
  }
  EXPECT_EQ(cuda::current_stream(), cuda::Stream::default_stream());
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_GE(start.elapsed_time(stop), 0.0f);
  side.synchronize();
  EXPECT_EQ(y.item<float>(), 2.0f * (1 << 20));
  // Another stream waiting on an event sees the work before it.
  cuda::Event done;
  done.record(side);
  done.block(cuda::current_stream());
  EXPECT_EQ(y.to(kCPU).item<float>(), 2.0f * (1 << 20));
}

TEST_F(Cuda, CopiesRoundTripBlockingAndNonBlocking) {
  Tensor host = arange(1000, dtype(kFloat32));
  Tensor pinned = host.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_FALSE(host.is_pinned());
  Tensor d1 = host.to(kCuda);                           // pageable: effectively synchronous
  Tensor d2 = pinned.to(kCuda, /*non_blocking=*/true);  // pinned: cudaMemcpyAsync on the stream
  EXPECT_TRUE(equal(d1.to(kCPU), host));
  EXPECT_TRUE(equal(d2.to(kCPU), host));  // stream order: the copy finished before this read
  // dtype and layout conversions across the device boundary.
  Tensor matrix = arange(12, dtype(kFloat32)).reshape({3, 4}).t();
  EXPECT_TRUE(equal(matrix.to(kCuda, kFloat64).to(kCPU), matrix.to(kFloat64)));
  Tensor strided = zeros({1000, 2}, kCuda).select(1, 0);
  strided.copy_(host);
  EXPECT_TRUE(equal(strided.to(kCPU), host));
}

TEST_F(Cuda, PinnedBlocksAreNotReusedWhileACopyMayRun) {
  // Free a pinned staging tensor right after a non_blocking copy: the next allocation of the
  // same size must not get the same block until the copy's event has completed.
  Tensor big = ones({1 << 22});
  Tensor device_copy;
  void* first = nullptr;
  {
    Tensor staging = big.pin_memory();
    first = staging.raw_data_ptr();
    device_copy = staging.to(kCuda, /*non_blocking=*/true);
  }
  Tensor next = empty({1 << 22}, pinned_memory(true));
  if (next.raw_data_ptr() == first) {
    // Reuse is only allowed once the copy is done.
    EXPECT_TRUE(cuda::current_stream().query());
  }
  EXPECT_EQ(device_copy.sum().item<float>(), static_cast<float>(1 << 22));
}

TEST_F(Cuda, DeviceMismatchNamesBothDevicesAndWhereTheyWereMade) {
  Tensor a = ones({2}, kCuda);
  Tensor b = ones({2});
  try {
    (void)(a + b);
    FAIL() << "mixing cuda:0 and cpu must throw";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("Expected all tensors to be on the same device, but found at least two devices"),
              std::string::npos)
        << e.message();
    EXPECT_NE(e.message().find("cuda:0"), std::string::npos);
    EXPECT_NE(e.message().find("test_cuda.cpp"), std::string::npos) << "provenance names the creation site";
  }
}

TEST_F(Cuda, AllocatorStatsAndSummaryFollowTensors) {
  cuda::reset_peak_memory_stats();
  const std::int64_t base = cuda::memory_allocated();
  {
    Tensor t = empty({1 << 20}, kCuda);  // 4 MiB
    EXPECT_EQ(cuda::memory_allocated() - base, 4 << 20);
    EXPECT_GE(cuda::memory_reserved(), cuda::memory_allocated());
    EXPECT_NE(cuda::memory_summary().find("Kiln CUDA memory summary, GPU 0"), std::string::npos);
  }
  EXPECT_EQ(cuda::memory_allocated(), base);
  EXPECT_GE(cuda::max_memory_allocated() - base, 4 << 20);
  cuda::empty_cache();
}

TEST_F(Cuda, OutOfMemoryIsAnErrorNotACrash) {
  const std::int64_t ooms = cuda::memory_stats().num_ooms;
  try {
    (void)empty({std::int64_t{1} << 46}, kCuda);  // 256 TiB of Float32
    FAIL() << "expected CUDA out of memory";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(e.message().find("CUDA out of memory. Tried to allocate 262144.00 GiB. GPU 0 has a total capacity of"),
              std::string::npos)
        << e.message();
  }
  EXPECT_EQ(cuda::memory_stats().num_ooms, ooms + 1);
}

// Few outputs over many elements run in two passes (Note [Reductions of few outputs over many
// elements] in core/cuda/launch.h): the op table's small cases never get there.
TEST_F(Cuda, LongReductionsOfFewOutputsMatchTheCpu) {
  manual_seed(0);
  const Tensor rows = randn({3, 70001}, dtype(kFloat64));  // 9 parts per output
  const Tensor flat = randn({1 << 21}) + 1;                // 256 parts of one output
  const Tensor ints = randint(-1000, 1000, {5, 40000});
  const Tensor halves = randn({1 << 20}).to(kHalf);
  for (const Tensor* t : {&rows, &flat, &ints, &halves}) {
    const Tensor on_gpu = t->to(kCuda);
    SCOPED_TRACE(dtype_name(t->dtype()));
    const double tol = t->dtype() == kFloat64 ? 1e-12 : t->dtype() == kHalf ? 1e-2 : 1e-5;
    EXPECT_TRUE(tensors_near(on_gpu.sum().to(kCPU), t->sum(), tol));
    EXPECT_TRUE(tensors_near(on_gpu.amax({}).to(kCPU), t->amax({}), 0.0));
    EXPECT_TRUE(tensors_near(on_gpu.amin({}).to(kCPU), t->amin({}), 0.0));
    if (t->dim() == 2) {
      EXPECT_TRUE(tensors_near(on_gpu.sum(1).to(kCPU), t->sum(1), tol));
      // the reduced dim strided: each output's elements are columns of a [n, few] tensor
      EXPECT_TRUE(tensors_near(on_gpu.t().contiguous().sum(0).to(kCPU), t->t().contiguous().sum(0), tol));
    }
    // The parts depend on the shape alone: the same sum twice is the same bits.
    EXPECT_TRUE(tensors_near(on_gpu.sum().to(kCPU), on_gpu.sum().to(kCPU), 0.0));
  }
  EXPECT_TRUE(tensors_near(rows.to(kCuda).mean(1).to(kCPU), rows.mean(1), 1e-12));
}

// Few positions along a long dim take a block each (arg_reduce_block_kernel): the first of two
// equal extremes wins, and the first NaN wins for good, as on the CPU.
TEST_F(Cuda, LongArgReductionsMatchTheCpu) {
  manual_seed(0);
  Tensor flat = randn({1 << 20});
  flat.narrow(0, 1000, 1).fill_(10.0);
  flat.narrow(0, 700000, 1).fill_(10.0);
  flat.narrow(0, 3000, 1).fill_(-10.0);
  flat.narrow(0, 800000, 1).fill_(-10.0);
  Tensor with_nan = flat.clone();
  with_nan.narrow(0, 500000, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  with_nan.narrow(0, 900000, 1).fill_(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(flat.to(kCuda).argmax().item<std::int64_t>(), 1000);
  EXPECT_EQ(flat.to(kCuda).argmin().item<std::int64_t>(), 3000);
  EXPECT_EQ(with_nan.to(kCuda).argmax().item<std::int64_t>(), 500000);
  EXPECT_EQ(with_nan.to(kCuda).argmin().item<std::int64_t>(), 500000);
  const Tensor rows = flat.view({4, 1 << 18});  // the innermost dim: a block per row
  const Tensor columns = rows.t().contiguous();  // [1 << 18, 4] along dim 0: 4 positions
  EXPECT_TRUE(tensors_near(rows.to(kCuda).argmax(1).to(kCPU), rows.argmax(1), 0.0));
  EXPECT_TRUE(tensors_near(rows.to(kCuda).argmin(1).to(kCPU), rows.argmin(1), 0.0));
  EXPECT_TRUE(tensors_near(columns.to(kCuda).argmax(0).to(kCPU), columns.argmax(0), 0.0));
  EXPECT_TRUE(tensors_near(columns.to(kCuda).argmin(0).to(kCPU), columns.argmin(0), 0.0));
}

TEST_F(Cuda, TrainingStepMatchesTheCpu) {
  manual_seed(0);
  nn::Linear cpu_layer(8, 4);
  nn::Linear gpu_layer(8, 4);
  gpu_layer.load_state_dict(cpu_layer.state_dict());
  gpu_layer.to(kCuda);
  Tensor x = randn({16, 8}), y = randint(0, 4, {16});
  nn::functional::cross_entropy(cpu_layer.forward(x), y).backward();
  nn::functional::cross_entropy(gpu_layer.forward(x.to(kCuda)), y.to(kCuda)).backward();
  EXPECT_TRUE(tensors_near(gpu_layer.weight.grad().to(kCPU), cpu_layer.weight.grad(), 1e-5));
}

}  // namespace
