// tests/core/test_op_table.cpp — forward tests generated from the op table
// (tests/support/op_table.h): hand-checked values in every supported dtype, the same
// results from non-contiguous inputs, shape/dtype inference on the meta device, and a
// tripwire that every CPU kernel is exercised by some entry.
#include <set>

#include "core/kernels.h"
#include "support/op_table.h"
#include "support/test_util.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<const OpInfo*> entries() {
  std::vector<const OpInfo*> out;
  for (const OpInfo& info : op_table()) out.push_back(&info);
  return out;
}

TensorList make_inputs(const OpCase& c, DType dtype, Device device = kCPU) {
  TensorList in;
  for (const InputSpec& s : c.inputs) in.push_back(s.make(dtype, device));
  return in;
}

/// Same values, non-contiguous memory: every other element of a buffer twice as long.
Tensor non_contiguous(const Tensor& t) {
  if (t.dim() == 0 || t.numel() <= 1) return t;
  Shape big = t.sizes().vec();
  big.back() *= 2;
  Tensor buffer = zeros(big, t.options());
  Tensor view = buffer.slice(-1, 0, std::nullopt, 2);
  view.copy_(t);
  return view;
}

class OpTable : public ::testing::TestWithParam<const OpInfo*> {};

TEST_P(OpTable, ForwardMatchesHandCheckedValuesInEveryDtype) {
  const OpInfo& op = *GetParam();
  for (const OpCase& c : op.cases) {
    for (DType dtype : op.dtypes) {
      SCOPED_TRACE(c.label + " in " + dtype_name(dtype));
      const Tensor out = op.fn(make_inputs(c, dtype));
      EXPECT_EQ(out.sizes(), IntArrayRef(c.expected_shape));
      if (!c.expected.empty()) {
        // Integer results are exact; floating ones are held to the dtype's precision.
        EXPECT_TRUE(values_near(out, c.expected, out.is_floating_point() ? tolerance(out.dtype()) : 0.0));
      }
    }
  }
}

TEST_P(OpTable, NonContiguousInputsGiveTheSameResult) {
  const OpInfo& op = *GetParam();
  for (const OpCase& c : op.cases) {
    SCOPED_TRACE(c.label);
    const TensorList in = make_inputs(c, kFloat64);
    TensorList strided;
    for (const Tensor& t : in) strided.push_back(non_contiguous(t));
    EXPECT_TRUE(tensors_near(op.fn(strided), op.fn(in), 1e-12));
  }
}

TEST_P(OpTable, MetaDeviceInfersShapeAndDtype) {
  const OpInfo& op = *GetParam();
  for (const OpCase& c : op.cases) {
    SCOPED_TRACE(c.label);
    const Tensor cpu = op.fn(make_inputs(c, op.dtypes.front()));
    const Tensor meta = op.fn(make_inputs(c, op.dtypes.front(), kMeta));
    EXPECT_TRUE(meta.is_meta());
    EXPECT_EQ(meta.sizes(), cpu.sizes());
    EXPECT_EQ(meta.dtype(), cpu.dtype());
  }
}

std::string entry_name(const ::testing::TestParamInfo<const OpInfo*>& info) { return info.param->name; }

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::ValuesIn(entries()), entry_name);

TEST(OpTableCoverage, EveryCpuKernelIsExercisedByAnEntry) {
  std::set<std::string> covered;
  for (const OpInfo& op : op_table()) covered.insert(op.kernels.begin(), op.kernels.end());
  std::vector<std::string> required;
  for (int i = 0; i < static_cast<int>(UnaryOp::kCount); ++i) required.push_back(op_name(static_cast<UnaryOp>(i)));
  for (int i = 0; i < static_cast<int>(BinaryOp::kCount); ++i) required.push_back(op_name(static_cast<BinaryOp>(i)));
  for (const char* n : {"sum", "prod", "amax", "amin", "where", "copy", "fill", "arange", "arg_reduce", "bmm",
                        "cat", "index_select", "index_add", "gather", "scatter", "im2col", "col2im", "max_pool2d", "max_pool2d_backward", "random",
                        "conv2d", "batch_norm", "pool2d"}) {
    required.push_back(n);
  }
  for (const std::string& name : required) EXPECT_TRUE(covered.count(name)) << "no op-table entry exercises kernel '" << name << "'";

  // And every CPU slot is filled (a kernel added to the table struct but never registered).
  const BackendKernels& cpu = kernels_for(DeviceType::CPU);
  for (auto k : cpu.unary) EXPECT_NE(k, nullptr);
  for (auto k : cpu.binary) EXPECT_NE(k, nullptr);
  for (auto k : cpu.reduce) EXPECT_NE(k, nullptr);
  for (const void* k : {(const void*)cpu.where, (const void*)cpu.copy, (const void*)cpu.fill, (const void*)cpu.arange,
                        (const void*)cpu.arg_reduce, (const void*)cpu.bmm, (const void*)cpu.cat,
                        (const void*)cpu.index_select, (const void*)cpu.index_add, (const void*)cpu.gather,
                        (const void*)cpu.scatter, (const void*)cpu.im2col, (const void*)cpu.col2im,
                        (const void*)cpu.max_pool2d, (const void*)cpu.max_pool2d_backward, (const void*)cpu.random, (const void*)cpu.adam,
                        (const void*)cpu.conv2d.forward, (const void*)cpu.conv2d.backward_input,
                        (const void*)cpu.conv2d.backward_weight, (const void*)cpu.batch_norm.forward,
                        (const void*)cpu.batch_norm.backward, (const void*)cpu.pool2d.forward,
                        (const void*)cpu.pool2d.backward}) {
    EXPECT_NE(k, nullptr);
  }
}

}  // namespace
