// tests/distributed/collective_checks.h — every collective, dtype and layout against the result
// computed in one process, for any process group and device: the MPI suite runs them on CPU
// tensors under mpirun, the NCCL suite on CUDA tensors. Every rank computes what each rank
// contributed, so it knows the answer without communicating.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "support/test_util.h"

namespace kiln::distributed::checks {

inline const std::vector<DType> kAllDTypes{kFloat32, kFloat64, kFloat16, kBFloat16, kInt64,
                                           kInt32,   kInt16,   kInt8,    kUInt8,    kBool};

/// Rank r's contribution: small integers (exact in every dtype), different on every rank.
inline Tensor contribution(int r, DType dtype, bool transposed, Device device = kCPU) {
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) {
    v[static_cast<std::size_t>(i)] = dtype == kBool ? ((i + r) % 3 == 0) : ((i * (r + 1)) % 7 + r);
  }
  const Tensor values = tensor(v, {3, 4}).to(dtype).to(device);
  // The non-contiguous layout: a transposed view of a [4, 3] tensor holding the same values.
  return transposed ? values.t().contiguous().t() : values;
}

inline std::vector<double> combined(ReduceOp op, DType dtype, int world, double plus = 0) {
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

inline void all_reduce_every_op_dtype_and_layout(ProcessGroup& group, Device device = kCPU) {
  const int rank = group.rank(), world = group.size();
  for (DType dtype : kAllDTypes) {
    for (bool transposed : {false, true}) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::AVG}) {
        if (op == ReduceOp::AVG && !is_floating_point(dtype)) continue;
        Tensor t = contribution(rank, dtype, transposed, device);
        group.all_reduce(t, op)->wait();
        EXPECT_EQ(t.is_contiguous(), !transposed);  // in place, layout kept
        EXPECT_EQ(t.dtype(), dtype);
        EXPECT_EQ(t.device(), device);
        EXPECT_EQ(testing::values(t), combined(op, dtype, world))
            << dtype << (transposed ? " transposed " : " ") << reduce_op_name(op) << "\n" << t;
      }
    }
  }
}

inline void broadcast_gather_and_scatter_every_dtype_and_layout(ProcessGroup& group, Device device = kCPU) {
  const int rank = group.rank(), world = group.size();
  for (DType dtype : kAllDTypes) {
    for (bool transposed : {false, true}) {
      Tensor b = contribution(rank, dtype, transposed, device);
      group.broadcast(b, world - 1)->wait();
      EXPECT_EQ(testing::values(b), testing::values(contribution(world - 1, dtype, false))) << dtype;

      std::vector<Tensor> gathered;
      for (int r = 0; r < world; ++r) gathered.push_back(contribution(0, dtype, transposed, device).zero_());
      group.all_gather(gathered, contribution(rank, dtype, transposed, device))->wait();
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(testing::values(gathered[static_cast<std::size_t>(r)]), testing::values(contribution(r, dtype, false)))
            << dtype << " " << r;
      }

      // Rank r contributes contribution(r) + k to slot k; slot `rank` is summed here.
      std::vector<Tensor> inputs;
      for (int k = 0; k < world; ++k) {
        inputs.push_back(dtype == kBool ? contribution(rank, dtype, transposed, device)
                                        : (contribution(rank, kFloat64, false) + k).to(dtype).to(device));
      }
      Tensor out = contribution(0, dtype, transposed, device).zero_();
      group.reduce_scatter(out, inputs, ReduceOp::SUM)->wait();
      const std::vector<double> expected = dtype == kBool ? combined(ReduceOp::SUM, dtype, world)
                                                          : combined(ReduceOp::SUM, dtype, world, world * rank);
      EXPECT_EQ(testing::values(out), expected) << dtype << (transposed ? " transposed" : "") << "\n" << out;
    }
  }
  group.barrier()->wait();
}

/// Eight collectives in flight at once complete, each with its own result.
inline void async_work_completes_and_keeps_order(ProcessGroup& group, Device device = kCPU) {
  const int world = group.size();
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 8; ++i) {
    tensors.push_back(full({1000}, static_cast<double>(i), TensorOptions().dtype(kFloat64).device(device)));
    works.push_back(group.all_reduce(tensors.back(), ReduceOp::SUM));
  }
  for (int i = 0; i < 8; ++i) {
    works[static_cast<std::size_t>(i)]->wait();
    EXPECT_TRUE(works[static_cast<std::size_t>(i)]->is_completed());
    EXPECT_EQ(tensors[static_cast<std::size_t>(i)][999].item<double>(), static_cast<double>(i * world));
  }
}

}  // namespace kiln::distributed::checks
