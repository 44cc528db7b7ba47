// core/dtype_sets.h — the dtypes a kernel is built for, stated once for every backend as a set
// of DTypes. Each elementwise functor names its set (core/ops/functors.h: `using dtypes =
// FloatingDTypes;`), and each backend turns a set into its own C++ types: the CPU into
// TypeList<float, double, Eigen::half, ...> (core/dispatch.h), CUDA into Types<float, double,
// __half, ...> (core/cuda/loops.cuh). A dtype outside an op's set is PyTorch's error, "exp_cpu"
// (or "exp_cuda") not implemented for 'Long', on both.
// Read next: core/dispatch.h.
#pragma once

#include "core/dtype.h"

namespace kiln {

template <DType... Ds>
struct DTypeSet {};

using FloatingDTypes = DTypeSet<DType::Float32, DType::Float64, DType::Float16, DType::BFloat16>;
using IntegralDTypes = DTypeSet<DType::Int64, DType::Int32, DType::Int16, DType::Int8, DType::UInt8>;
using NumericDTypes = DTypeSet<DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64,
                               DType::Int32, DType::Int16, DType::Int8, DType::UInt8>;
using AllDTypes = DTypeSet<DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int64,
                           DType::Int32, DType::Int16, DType::Int8, DType::UInt8, DType::Bool>;
using BoolDTypes = DTypeSet<DType::Bool>;
/// The LSTM cell's fused kernels, on the CPU and on CUDA.
using LstmCellDTypes = DTypeSet<DType::Float32, DType::Float64>;

}  // namespace kiln
