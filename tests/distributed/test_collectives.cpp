// tests/distributed/test_collectives.cpp — every collective, dtype and layout against the
// result computed in one process. Runs under `mpirun -np 2` (ctest label `distributed`); every
// rank computes what each rank contributed, so it knows the answer without communicating.
#include <gtest/gtest.h>

#include <algorithm>

#include "distributed/distributed.h"
#include "distributed_setup.h"
#include "support/test_util.h"

namespace kiln::distributed {
namespace {

const std::vector<DType> kAllDTypes{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64,
                                    kInt32,   kInt16,   kInt8,    kUInt8,    kBool};

/// Rank r's contribution: small integers (exact in every dtype), different on every rank.
Tensor contribution(int r, DType dtype, bool transposed) {
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) {
    v[static_cast<std::size_t>(i)] = dtype == kBool ? ((i + r) % 3 == 0) : ((i * (r + 1)) % 7 + r);
  }
  const Tensor values = tensor(v, {3, 4}).to(dtype);
  // The non-contiguous layout: a transposed view of a [4, 3] tensor holding the same values.
  return transposed ? values.t().contiguous().t() : values;
}

std::vector<double> combined(ReduceOp op, DType dtype, int world, double plus = 0) {
  std::vector<double> acc = testing::values(contribution(0, dtype, false));
  for (int r = 1; r < world; ++r) {
    const std::vector<double> next = testing::values(contribution(r, dtype, false));
    for (std::size_t i = 0; i < acc.size(); ++i) {
      acc[i] = op == ReduceOp::MIN ? std::min(acc[i], next[i]) : op == ReduceOp::MAX ? std::max(acc[i], next[i])
                                                                                        : acc[i] + next[i];
    }
  }
  for (double& a : acc) {
    if (op == ReduceOp::AVG) a /= world;
    if (dtype == kBool) a = a != 0;  // a sum of truths is "any"
    a += plus;
  }
  return acc;
}

TEST(Collectives, AllReduceEveryOpDtypeAndLayout) {
  ensure_process_group();
  const int rank = get_rank(), world = get_world_size();
  for (DType dtype : kAllDTypes) {
    for (bool transposed : {false, true}) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::AVG}) {
        if (op == ReduceOp::AVG && !is_floating_point(dtype)) continue;
        Tensor t = contribution(rank, dtype, transposed);
        all_reduce(t, op);
        EXPECT_EQ(t.is_contiguous(), !transposed);  // in place, layout kept
        EXPECT_EQ(t.dtype(), dtype);
        EXPECT_EQ(testing::values(t), combined(op, dtype, world))
            << dtype << (transposed ? " transposed " : " ") << reduce_op_name(op) << "\n" << t;
      }
    }
  }
}

TEST(Collectives, AvgOfIntegersIsAClearError) {
  ensure_process_group();
  Tensor t = zeros({2}, TensorOptions().dtype(kInt64));
  EXPECT_THROW(all_reduce(t, ReduceOp::AVG), TypeError);
}

TEST(Collectives, BroadcastGatherAndScatterEveryDtypeAndLayout) {
  ensure_process_group();
  const int rank = get_rank(), world = get_world_size();
  for (DType dtype : kAllDTypes) {
    for (bool transposed : {false, true}) {
      Tensor b = contribution(rank, dtype, transposed);
      broadcast(b, world - 1);
      EXPECT_EQ(testing::values(b), testing::values(contribution(world - 1, dtype, false))) << dtype;

      std::vector<Tensor> gathered;
      for (int r = 0; r < world; ++r) gathered.push_back(contribution(0, dtype, transposed).zero_());
      all_gather(gathered, contribution(rank, dtype, transposed));
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(testing::values(gathered[static_cast<std::size_t>(r)]), testing::values(contribution(r, dtype, false)))
            << dtype << " " << r;
      }

      // Rank r contributes contribution(r) + k to slot k; slot `rank` is summed here.
      std::vector<Tensor> inputs;
      for (int k = 0; k < world; ++k) {
        inputs.push_back(dtype == kBool ? contribution(rank, dtype, transposed)
                                        : (contribution(rank, kFloat64, false) + k).to(dtype));
      }
      Tensor out = contribution(0, dtype, transposed).zero_();
      reduce_scatter(out, inputs, ReduceOp::SUM);
      const std::vector<double> expected = dtype == kBool ? combined(ReduceOp::SUM, dtype, world)
                                                          : combined(ReduceOp::SUM, dtype, world, world * rank);
      EXPECT_EQ(testing::values(out), expected) << dtype << (transposed ? " transposed" : "") << "\n" << out;
    }
  }
  barrier();
}

TEST(Collectives, AsyncWorkCompletesAndKeepsOrder) {
  ensure_process_group();
  const int world = get_world_size();
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 8; ++i) {
    tensors.push_back(full({1000}, static_cast<double>(i), TensorOptions().dtype(kFloat64)));
    works.push_back(all_reduce(tensors.back(), ReduceOp::SUM, {.async_op = true}));
  }
  for (int i = 0; i < 8; ++i) {
    works[static_cast<std::size_t>(i)]->wait();
    EXPECT_TRUE(works[static_cast<std::size_t>(i)]->is_completed());
    EXPECT_EQ(tensors[static_cast<std::size_t>(i)][999].item<double>(), static_cast<double>(i * world));
  }
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

}  // namespace
}  // namespace kiln::distributed
