// tools/accuracy_report.cpp — Kiln's Float32 error beside PyTorch's on the same inputs, for the
// numerics cases written by tools/accuracy_vs_pytorch.py (each against PyTorch's Float64
// result). The error is max |result - reference| / max |reference|.
//   /usr/bin/python3 tools/accuracy_vs_pytorch.py build/accuracy
//   build/tools/accuracy_report build/accuracy
// Read next: core/cpu/cascade_sum.h (Note [How Kiln sums]).
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

double relative_error(const Tensor& result, const Tensor& reference) {
  const Tensor diff = (result.to(kFloat64).reshape({-1}) - reference.reshape({-1})).abs();
  return diff.max().item<double>() / reference.abs().max().item<double>();
}

Tensor batch_norm_case(const Tensor& x) {
  const std::int64_t c = x.sizes()[1];
  const Tensor running_mean = zeros({c}), running_var = ones({c});
  const Tensor y = batch_norm(x, running_mean, running_var, {}, {}, /*training=*/true, 0.1, 1e-5);
  return cat({y.reshape({-1}), running_var}, 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR  (DIR written by tools/accuracy_vs_pytorch.py)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> cases = {
      {"sum_1e7_uniform", [](const Tensor& x) { return x.sum(); }},
      {"row_means_4x1e6", [](const Tensor& x) { return x.mean({1}); }},
      {"var_1e6_mean1000_std1", [](const Tensor& x) { return x.var({0}, true); }},
      {"batch_norm_128x8x28x28_mean50_std0.5", batch_norm_case},
      {"softmax_64x4096", [](const Tensor& x) { return x.softmax(1); }},
      {"log_softmax_64x4096", [](const Tensor& x) { return x.log_softmax(1); }},
      {"layer_norm_64x4096_mean50_std0.5", [](const Tensor& x) { return layer_norm(x, {4096}); }},
      {"var_dim0_1e6x2_mean1000_std1", [](const Tensor& x) { return x.var({0}, true); }},
      {"mean_dim0_1e6x2_mean1000_std1", [](const Tensor& x) { return x.mean({0}); }},
      {"sum_dim0_1e6x2_mean1000_std1", [](const Tensor& x) { return x.sum({0}); }},
      {"batch_norm_1e6x2_mean1000_std1", batch_norm_case},
  };
  std::printf("| case | Kiln Float32 rel. error | PyTorch Float32 rel. error | Kiln / PyTorch |\n|---|---|---|---|\n");
  int worse = 0;
  try {
    for (const auto& [name, fn] : cases) {
      const std::string base = dir + "/" + name;
      const Tensor input = load_npy(base + ".input.npy");
      const Tensor reference = load_npy(base + ".reference.npy");
      const double kiln = relative_error(fn(input), reference);
      const double pytorch = relative_error(load_npy(base + ".pytorch32.npy"), reference);
      worse += kiln > pytorch;
      std::printf("| %s | %.2e | %.2e | %.2f |\n", name.c_str(), kiln, pytorch, kiln / pytorch);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("\n%d of %zu cases less accurate than PyTorch\n", worse, cases.size());
  return worse == 0 ? 0 : 3;
}
