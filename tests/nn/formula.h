// tests/nn/formula.h — the values tools/rnn_reference.py and tools/attention_reference.py give
// PyTorch's modules, so Kiln's can be given the same without matching random generators, and
// a comparison with the outputs those scripts recorded.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln.h"

namespace kiln::testing {

/// Element k (row-major) of a tensor whose name has `salt` characters: 0.4 sin(0.37 k + 0.11 salt + 0.05).
inline Tensor formula(IntArrayRef sizes, std::size_t salt) {
  std::vector<double> v(static_cast<std::size_t>(compute_numel(sizes)));
  for (std::size_t k = 0; k < v.size(); ++k) {
    v[k] = 0.4 * std::sin(0.37 * static_cast<double>(k) + 0.11 * static_cast<double>(salt) + 0.05);
  }
  return tensor(v, kFloat64).reshape(sizes);
}

/// The module in Float64 with the formula's values in every parameter, loaded by name.
inline void load_formula(nn::Module& m) {
  m.to(kFloat64);
  StateDict values;
  for (const auto& [name, p] : m.named_parameters()) values.insert(name, formula(p.sizes(), name.size()));
  m.load_state_dict(values);
}

inline void expect_equals_reference(const Tensor& got, const std::vector<double>& expected, double tol = 1e-13) {
  ASSERT_EQ(static_cast<std::size_t>(got.numel()), expected.size());
  const Tensor flat = got.contiguous().reshape({-1}).to(kFloat64);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(flat.select(0, static_cast<std::int64_t>(i)).item<double>(), expected[i], tol) << "element " << i;
  }
}

}  // namespace kiln::testing
