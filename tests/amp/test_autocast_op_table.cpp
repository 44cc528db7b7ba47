// tests/amp/test_autocast_op_table.cpp — every op of the op table (tests/support/op_table.h)
// under CPU autocast: it runs, a floating result is Float32 or BFloat16 (never Float16 or
// Float64 from Float32 inputs, unless the op is an explicit cast), its values agree with the Float32 run to BFloat16's
// precision, and for differentiable ops the gradients reach the Float32 inputs in Float32.
#include "support/op_table.h"
#include "support/test_util.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<const OpInfo*> float32_entries() {
  std::vector<const OpInfo*> out;
  for (const OpInfo& info : op_table()) {
    if (std::find(info.dtypes.begin(), info.dtypes.end(), kFloat32) != info.dtypes.end()) out.push_back(&info);
  }
  return out;
}

class AutocastOpTable : public ::testing::TestWithParam<const OpInfo*> {};

TEST_P(AutocastOpTable, RunsInADocumentedDtypeAndMatchesFloat32) {
  const OpInfo& op = *GetParam();
  for (const OpCase& c : op.cases) {
    SCOPED_TRACE(c.label);
    TensorList inputs;
    for (const InputSpec& s : c.inputs) {
      const bool grad = op.differentiable && s.kind == InputSpec::Kind::Float && s.differentiable;
      inputs.push_back(s.make(kFloat32, kCPU, grad));
    }
    const Tensor reference = [&] {
      NoGradGuard no_grad;
      return op.fn(inputs);
    }();
    Tensor out;
    {
      amp::autocast guard(DeviceType::CPU);
      out = op.fn(inputs);
    }
    EXPECT_EQ(out.sizes(), reference.sizes());
    if (!out.is_floating_point()) {
      EXPECT_EQ(out.dtype(), reference.dtype());
      EXPECT_TRUE(tensors_near(out, reference, 0.0));
      continue;
    }
    // (or the dtype the op was asked for: to(kFloat64) stays an explicit cast)
    EXPECT_TRUE(out.dtype() == kFloat32 || out.dtype() == kBFloat16 || out.dtype() == reference.dtype())
        << out.dtype();
    // BFloat16 keeps 8 bits of mantissa; a product or sum of rounded inputs drifts a little more.
    EXPECT_TRUE(tensors_near(out.to(kFloat32), reference, 4 * tolerance(kBFloat16)));
    if (!out.requires_grad() || out.numel() == 0) continue;
    out.to(kFloat32).sum().backward();
    for (const Tensor& in : inputs) {
      if (in.requires_grad() && in.grad().defined()) {
        EXPECT_EQ(in.grad().dtype(), kFloat32);
      }
    }
  }
}

std::string entry_name(const ::testing::TestParamInfo<const OpInfo*>& info) { return info.param->name; }

INSTANTIATE_TEST_SUITE_P(Ops, AutocastOpTable, ::testing::ValuesIn(float32_entries()), entry_name);

}  // namespace
