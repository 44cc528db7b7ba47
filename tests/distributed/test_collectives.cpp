// tests/distributed/test_collectives.cpp — the MPI backend's collectives on CPU tensors, under
// `mpirun -np 2` (ctest label `distributed`); the checks themselves are in collective_checks.h,
// which the NCCL suite shares.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "collective_checks.h"
#include "distributed/distributed.h"
#include "distributed_setup.h"

namespace kiln::distributed {
namespace {

TEST(Collectives, AllReduceEveryOpDtypeAndLayout) {
  ensure_process_group();
  checks::all_reduce_every_op_dtype_and_layout(default_group());
}

TEST(Collectives, AvgOfIntegersIsAClearError) {
  ensure_process_group();
  Tensor t = zeros({2}, TensorOptions().dtype(kInt64));
  EXPECT_THROW(all_reduce(t, ReduceOp::AVG), TypeError);
}

TEST(Collectives, BroadcastGatherAndScatterEveryDtypeAndLayout) {
  ensure_process_group();
  checks::broadcast_gather_and_scatter_every_dtype_and_layout(default_group());
}

TEST(Collectives, AsyncWorkCompletesAndKeepsOrder) {
  ensure_process_group();
  checks::async_work_completes_and_keeps_order(default_group());
  Tensor t = full({10}, 1.0);
  const std::shared_ptr<Work> work = all_reduce(t, ReduceOp::SUM, {.async_op = true});
  work->wait();
  EXPECT_EQ(t[9].item<double>(), get_world_size());
}

TEST(Collectives, WrongArgumentsAreClearErrorsBeforeAnythingIsSent) {
  ensure_process_group();
  const int world = get_world_size();
  Tensor t = zeros({3});
  EXPECT_THROW(broadcast(t, world), ValueError);
  std::vector<Tensor> too_few(static_cast<std::size_t>(world) + 1, zeros({3}));
  EXPECT_THROW(all_gather(too_few, t), ValueError);
  std::vector<Tensor> wrong_shape(static_cast<std::size_t>(world), zeros({4}));
  EXPECT_THROW(all_gather(wrong_shape, t), ValueError);
  EXPECT_THROW(init_process_group(), ValueError);  // twice
  barrier();
}

// The non-blocking all-reduce costs what the blocking one does only with the algorithm the
// group asks Open MPI for (prefer_rabenseifner_iallreduce, Note [Two threads talk to MPI]).
TEST(Collectives, OpenMpisNonBlockingAllReduceIsAskedForRabenseifner) {
  ensure_process_group();
  const char* name = "coll_libnbc_iallreduce_algorithm";
  const char* chosen = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");  // Kiln's, or the user's
  if (chosen != nullptr && std::string(chosen) != "3") GTEST_SKIP() << "the user chose algorithm " << chosen;
  int provided = 0, index = 0, count = 0, algorithm = -1;
  ASSERT_EQ(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) {
    MPI_T_finalize();
    GTEST_SKIP() << "this MPI library has no " << name;
  }
  MPI_T_cvar_handle handle;
  ASSERT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
  MPI_T_cvar_read(handle, &algorithm);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  EXPECT_EQ(algorithm, 3);  // libnbc's 3: Rabenseifner (reduce-scatter, then all-gather)
}

}  // namespace
}  // namespace kiln::distributed
