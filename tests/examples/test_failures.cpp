// tests/examples/test_failures.cpp — every case of the failure catalogue still reproduces with
// its documented message and its fix still works (GPU-only cases skip without a GPU). A case
// that silently stopped failing would make the catalogue lie, so this is a test, not a demo.
#include <gtest/gtest.h>

#include <sstream>

#include "../../examples/support/failure_cases.h"

namespace kiln::examples {

// gtest prints parameters in the test list; the case's name says more than its bytes.
void PrintTo(const FailureCase& c, std::ostream* os) { *os << c.name; }

namespace {

class FailureCatalogue : public ::testing::TestWithParam<FailureCase> {};

TEST_P(FailureCatalogue, ReproducesWithItsMessageAndTheFixWorks) {
  const FailureCase& c = GetParam();
  if (c.gpu_only && !cuda::is_available()) GTEST_SKIP() << "CUDA not available";
  std::ostringstream out;
  const std::optional<std::string> seen = c.reproduce(out);
  ASSERT_TRUE(seen.has_value()) << c.name << " did not fail\n" << out.str();
  EXPECT_NE(seen->find(c.expected), std::string::npos) << "expected \"" << c.expected << "\" in:\n" << *seen;
  if (c.predict) {
    EXPECT_TRUE(c.predict(out)) << c.name << ": the plan did not foresee the failure\n" << out.str();
  }
  EXPECT_TRUE(c.fix(out)) << out.str();
}

TEST(FailureCatalogue, HasTheFifteenDocumentedCases) {
  std::vector<std::string> names;
  for (const FailureCase& c : failure_cases()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"float64-input", "deep-copy-memory", "zero-copy-aliasing",
                                             "dangling-blob", "non-contiguous", "unregistered-parameter",
                                             "grad-on-intermediate", "fgsm-without-grad", "oom-fragmentation",
                                             "batchnorm-batch1", "device-mismatch", "inplace-saved-tensor",
                                             "backward-twice", "non-blocking-pageable", "killed-run"}));
}

TEST(FailureCatalogue, EveryCaseIsDocumented) {
  std::ifstream doc(std::string(KILN_SOURCE_DIR) + "/docs/failure-cases.md");
  ASSERT_TRUE(doc) << "docs/failure-cases.md is missing";
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  for (const FailureCase& c : failure_cases()) {
    EXPECT_NE(text.find("## " + c.name), std::string::npos) << c.name << " has no section";
    EXPECT_NE(text.find("failures " + c.name), std::string::npos) << c.name << " has no command";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FailureCatalogue, ::testing::ValuesIn(failure_cases()),
                         [](const ::testing::TestParamInfo<FailureCase>& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace kiln::examples
