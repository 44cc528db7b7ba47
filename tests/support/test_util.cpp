// tests/support/test_util.cpp — tensor assertions and small fixtures.
#include "support/test_util.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kiln::testing {

std::vector<double> values(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor c = t.detach().to(kCPU).to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data_ptr(), y.raw_data_ptr(), x.nbytes()) == 0;
}

void set_bits(const Tensor& t, std::int64_t i, std::uint32_t float_bits) {
  KILN_CHECK(t.is_contiguous() && (t.dtype() == kFloat32 || t.dtype() == kBFloat16),
             "set_bits: a contiguous Float32 or BFloat16 tensor expected");
  auto* bytes = static_cast<unsigned char*>(t.raw_data_ptr());
  if (t.dtype() == kFloat32) {
    std::memcpy(bytes + i * 4, &float_bits, 4);
  } else {
    const auto upper = static_cast<std::uint16_t>(float_bits >> 16);
    std::memcpy(bytes + i * 2, &upper, 2);
  }
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

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace kiln::testing
