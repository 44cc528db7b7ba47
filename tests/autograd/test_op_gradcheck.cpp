// tests/autograd/test_op_gradcheck.cpp — every differentiable op-table entry is gradchecked
// in Float64 (contiguous and non-contiguous inputs) and gradgradchecked (its backward's own
// backward); and a tripwire: every Function named in autograd/functions/*.cpp must show up
// in the graphs these checks build, so a new op without a table entry fails here.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "autograd/node.h"
#include "support/op_table.h"
#include "support/test_util.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<const OpInfo*> differentiable_entries() {
  std::vector<const OpInfo*> out;
  for (const OpInfo& info : op_table()) {
    if (info.differentiable) out.push_back(&info);
  }
  return out;
}

TensorList grad_inputs(const OpCase& c, bool strided) {
  TensorList in;
  for (const InputSpec& s : c.inputs) {
    Tensor t = s.make(kFloat64);
    if (strided && t.dim() > 0 && t.numel() > 1) {
      Shape big = t.sizes().vec();
      big.back() *= 2;
      Tensor buffer = zeros(big, t.options());
      Tensor view = buffer.slice(-1, 0, std::nullopt, 2);
      view.copy_(t);
      t = view;
    }
    in.push_back(s.kind == InputSpec::Kind::Float && s.differentiable ? t.as_leaf(true) : t);
  }
  return in;
}

class OpGradcheck : public ::testing::TestWithParam<const OpInfo*> {};

TEST_P(OpGradcheck, BackwardMatchesFiniteDifferences) {
  const OpInfo& op = *GetParam();
  int checked = 0;
  for (const OpCase& c : op.cases) {
    if (!c.gradcheck) continue;
    for (bool strided : {false, true}) {
      SCOPED_TRACE(c.label + (strided ? " (non-contiguous)" : ""));
      EXPECT_TRUE(autograd::gradcheck(op.fn, grad_inputs(c, strided)));
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << op.name << " has no case smooth enough for finite differences";
}

TEST_P(OpGradcheck, DoubleBackwardMatchesFiniteDifferences) {
  const OpInfo& op = *GetParam();
  for (const OpCase& c : op.cases) {
    if (!c.gradcheck || !c.gradgradcheck) continue;
    SCOPED_TRACE(c.label);
    manual_seed(0);
    EXPECT_TRUE(autograd::gradgradcheck(op.fn, grad_inputs(c, false)));
    return;  // one case per op: second derivatives are slower to check
  }
  GTEST_SKIP() << op.name << " has no case smooth enough for finite differences";
}

std::string entry_name(const ::testing::TestParamInfo<const OpInfo*>& info) { return info.param->name; }

INSTANTIATE_TEST_SUITE_P(Ops, OpGradcheck, ::testing::ValuesIn(differentiable_entries()), entry_name);

void collect_names(const Tensor& t, std::set<std::string>& names) {
  std::vector<std::shared_ptr<autograd::Node>> stack;
  if (t.defined() && t.grad_fn()) stack.push_back(t.grad_fn());
  std::set<const autograd::Node*> seen;
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    if (!seen.insert(n.get()).second) continue;
    names.insert(n->name());
    for (const auto& e : n->next_edges()) {
      if (e.is_valid()) stack.push_back(e.function);
    }
  }
}

TEST(OpGradcheckCoverage, EveryFunctionAppearsInACheckedGraph) {
  // The names declared in the sources: `static constexpr const char* name = "XBackward0";`
  // (and the IsMax ? "A" : "B" pairs).
  std::set<std::string> declared;
  const std::regex decl(R"(name\s*=\s*(?:IsMax\s*\?\s*)?"(\w+)\"(?:\s*:\s*\"(\w+)\")?)");
  for (const auto& entry : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + "/autograd/functions")) {
    if (entry.path().extension() != ".cpp") continue;
    std::ifstream in(entry.path());
    ASSERT_TRUE(in.good()) << entry.path();
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    for (std::sregex_iterator it(text.begin(), text.end(), decl), end; it != end; ++it) {
      declared.insert((*it)[1]);
      if ((*it)[2].matched) declared.insert((*it)[2]);
    }
  }
  ASSERT_GT(declared.size(), 30u);

  std::set<std::string> seen;
  for (const OpInfo* op : differentiable_entries()) {
    for (const OpCase& c : op->cases) {
      const TensorList in = grad_inputs(c, false);
      manual_seed(0);
      const Tensor out = op->fn(in);
      collect_names(out, seen);
      TensorList diff;
      for (const Tensor& t : in) {
        if (t.requires_grad()) diff.push_back(t);
      }
      if (!out.requires_grad() || diff.empty()) continue;
      // The first-order gradients' own graphs hold the backward-only Functions.
      for (const Tensor& g : autograd::grad({out}, diff, {ones_like(out)}, true, true, true)) {
        collect_names(g, seen);
      }
    }
  }
  for (const std::string& name : declared) {
    EXPECT_TRUE(seen.count(name)) << name << " is declared in autograd/functions but no gradchecked "
                                  << "op-table entry reaches it: add an entry to tests/support/op_table.cpp";
  }
}

}  // namespace
