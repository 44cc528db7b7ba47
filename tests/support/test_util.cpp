// tests/support/test_util.cpp — tensor assertions and small fixtures.
#include "support/test_util.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace kiln::testing {

std::vector<double> values(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor c = t.detach().to(kCPU).to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::shared_ptr<data::TensorDataset> numbers(std::int64_t n) {
  return std::make_shared<data::TensorDataset>(arange(n).to(kFloat32).unsqueeze(1), arange(n));
}

namespace {
std::string join(const std::vector<double>& v) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os.str() + "]";
}
bool close(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1 + std::fabs(b));
}
}  // namespace

::testing::AssertionResult values_near(const Tensor& actual, const std::vector<double>& expected, double tol) {
  const std::vector<double> got = values(actual);
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << "got " << got.size() << " elements " << join(got)
                                         << ", expected " << expected.size() << " " << join(expected);
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!close(got[i], expected[i], tol)) {
      return ::testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", expected "
                                           << expected[i] << "\n got " << join(got) << "\n expected "
                                           << join(expected);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult tensors_near(const Tensor& actual, const Tensor& expected, double tol) {
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.sizes() << " vs expected " << expected.sizes();
  }
  return values_near(actual, values(expected), tol);
}

}  // namespace kiln::testing
