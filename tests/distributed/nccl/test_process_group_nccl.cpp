// tests/distributed/nccl/test_process_group_nccl.cpp — the NCCL backend in one process, no
// mpirun: a world of one on the first GPU, and two ranks as two threads (on two GPUs, or both
// on one if NCCL allows it there). On a machine without a GPU only the errors are checked;
// the rest skips itself. scripts/gpu_check.sh runs this on a lent GPU.
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "collective_checks.h"
#include "core/cuda/cuda.h"
#include "distributed/data_parallel.h"
#include "distributed/distributed.h"
#include "distributed/process_group_mpi.h"
#include "distributed/process_group_nccl.h"

namespace kiln::distributed {
namespace {

constexpr std::chrono::milliseconds kTimeout = std::chrono::seconds(60);

Device cuda_device(int index) { return Device(DeviceType::CUDA, index); }

std::shared_ptr<ProcessGroup> world_of_one() {
  NcclGroupOptions o;
  o.id = nccl_unique_id();
  o.device = 0;
  o.timeout = kTimeout;
  return new_nccl_process_group(o);
}

/// Runs `body(group, device)` on `world` threads, one NCCL rank each: on devices 0, 1, ... when
/// there are enough, else all on device 0. Returns NCCL's refusal when it would not form the
/// communicator, or an empty string when the bodies ran.
std::string run_ranks(int world, const std::function<void(ProcessGroup&, Device)>& body) {
  const NcclUniqueId id = nccl_unique_id();
  const bool one_gpu_each = cuda::device_count() >= world;
  std::vector<std::string> refusals(static_cast<std::size_t>(world));
  std::vector<std::exception_ptr> failures(static_cast<std::size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      const int device = one_gpu_each ? r : 0;
      cuda::set_device(device);
      std::shared_ptr<ProcessGroup> group;
      try {
        NcclGroupOptions o;
        o.rank = r;
        o.size = world;
        o.local_rank = r;
        o.device = device;
        o.id = id;
        o.timeout = kTimeout;
        group = new_nccl_process_group(o);
      } catch (const DistBackendError& e) {
        refusals[static_cast<std::size_t>(r)] = e.what();
        return;
      }
      try {
        body(*group, cuda_device(device));
        cuda::synchronize(device);
      } catch (...) {
        failures[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::exception_ptr& f : failures) {
    if (f) std::rethrow_exception(f);
  }
  for (const std::string& refusal : refusals) {
    if (!refusal.empty()) return refusal;
  }
  return {};
}

TEST(NcclProcessGroup, WithoutAGpuOrNcclItIsAClearError) {
  if (cuda::is_available() && nccl_is_available()) GTEST_SKIP() << "a GPU and NCCL are present";
  NcclGroupOptions o;
  try {
    if (nccl_is_available()) o.id = nccl_unique_id();
    new_nccl_process_group(o);
    ADD_FAILURE() << "expected DistBackendError";
  } catch (const DistBackendError& e) {
    const std::string expected =
        nccl_is_available() ? "ProcessGroupNCCL is only supported with GPUs, no GPUs found!" : "built without NCCL";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(NcclProcessGroup, InitProcessGroupNamesTheBackendsOfThisBuild) {
  try {
    init_process_group({.backend = "gloo"});
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    const std::string built = std::string(mpi_is_available() ? "mpi" : "") +
                              (mpi_is_available() && nccl_is_available() ? ", " : "") +
                              (nccl_is_available() ? "nccl" : "");
    EXPECT_NE(std::string(e.what()).find("unknown backend 'gloo' (Kiln has mpi and nccl; this build has: " +
                                         (built.empty() ? std::string("none") : built) + ")"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(is_initialized());
}

TEST(NcclProcessGroup, WorldOfOneRunsEveryCollectiveDtypeAndLayout) {
  if (!cuda::is_available() || !nccl_is_available()) GTEST_SKIP() << "needs a CUDA device and NCCL";
  const std::shared_ptr<ProcessGroup> group = world_of_one();
  EXPECT_EQ(group->backend(), "nccl");
  checks::all_reduce_every_op_dtype_and_layout(*group, cuda_device(0));
  checks::broadcast_gather_and_scatter_every_dtype_and_layout(*group, cuda_device(0));
  checks::async_work_completes_and_keeps_order(*group, cuda_device(0));
}

TEST(NcclProcessGroup, CpuTensorsAndOtherDevicesAreClearErrors) {
  if (!cuda::is_available() || !nccl_is_available()) GTEST_SKIP() << "needs a CUDA device and NCCL";
  const std::shared_ptr<ProcessGroup> group = world_of_one();
  Tensor cpu = zeros({4});
  try {
    group->all_reduce(cpu);
    ADD_FAILURE() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Tensors must be CUDA and dense"), std::string::npos) << e.what();
  }
  if (cuda::device_count() > 1) {
    Tensor elsewhere = zeros({4}, TensorOptions().device(cuda_device(1)));
    EXPECT_THROW(group->all_reduce(elsewhere), ValueError);
  }
}

TEST(NcclProcessGroup, TwoRanksAsThreadsAgreeWithTheOneProcessResult) {
  if (!cuda::is_available() || !nccl_is_available()) GTEST_SKIP() << "needs a CUDA device and NCCL";
  const std::string refusal = run_ranks(2, [](ProcessGroup& group, Device device) {
    checks::all_reduce_every_op_dtype_and_layout(group, device);
    checks::broadcast_gather_and_scatter_every_dtype_and_layout(group, device);
    checks::async_work_completes_and_keeps_order(group, device);
  });
  if (!refusal.empty()) GTEST_SKIP() << "NCCL would not form two ranks here: " << refusal;
}

TEST(NcclProcessGroup, DistributedDataParallelAveragesTwoRanksGradients) {
  if (!cuda::is_available() || !nccl_is_available()) GTEST_SKIP() << "needs a CUDA device and NCCL";
  manual_seed(5);
  const Tensor x = randn({64, 20}), y = randint(0, 5, {64});
  auto make_model = [] {
    manual_seed(9);
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Linear>(20, 32));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Linear>(32, 5));
    return model;
  };
  // The reference: the whole batch on one device.
  auto reference = make_model();
  reference->to(cuda_device(0));
  cross_entropy(reference->forward(x.to(cuda_device(0))), y.to(cuda_device(0))).backward();
  const auto expected = reference->named_parameters();

  std::vector<std::shared_ptr<nn::Sequential>> replicas{make_model(), make_model()};
  const std::string refusal = run_ranks(2, [&](ProcessGroup& group, Device device) {
    auto model = replicas[static_cast<std::size_t>(group.rank())];
    model->to(device);
    nn::DistributedDataParallel ddp(model, {.process_group = std::shared_ptr<ProcessGroup>(&group, [](auto*) {}),
                                            .first_bucket_cap_mb = 0.001});
    const std::int64_t half = 32, from = group.rank() * half;
    cross_entropy(ddp.forward(x.narrow(0, from, half).to(device)), y.narrow(0, from, half).to(device))
        .backward();
  });
  if (!refusal.empty()) GTEST_SKIP() << "NCCL would not form two ranks here: " << refusal;
  for (const auto& replica : replicas) {
    const auto got = replica->named_parameters();
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(testing::tensors_near(got[i].second.grad(), expected[i].second.grad(), 1e-5)) << got[i].first;
    }
  }
}

}  // namespace
}  // namespace kiln::distributed
