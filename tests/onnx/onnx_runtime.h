// tests/onnx/onnx_runtime.h — the ONNX export tests' oracle: a model Kiln exported is run in
// ONNX Runtime (tests/onnx/run_onnx.py, in the virtual environment scripts/onnx_runtime.sh
// makes under the build folder) and its outputs compared with Kiln's eval-mode outputs at
// batch 1 and batch 37, the file having been exported at batch 3 with a dynamic batch axis.
// Without that environment the tests skip, saying why, unless KILN_REQUIRE_ONNX_RUNTIME=1.
// Read next: tests/onnx/test_export_ops.cpp.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::testing {

/// Why ONNX Runtime cannot be run ("" when it can).
std::string onnx_runtime_missing();

/// Runs the model at `path` in ONNX Runtime once per entry of `runs` (its inputs, in order)
/// and returns each run's outputs.
std::vector<std::vector<Tensor>> run_in_onnx_runtime(const std::string& path, const std::vector<std::vector<Tensor>>& runs);

/// max |actual - expected| / max |expected|, over tensors of one shape (infinity when they differ).
double max_relative_error(const Tensor& actual, const Tensor& expected);

/// A module whose forward is any function (and whose parameters are its children's).
struct Lambda : nn::Module {
  std::function<Tensor(const Tensor&)> fn;
  explicit Lambda(std::function<Tensor(const Tensor&)> f,
                  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> children = {})
      : Module("Lambda"), fn(std::move(f)) {
    for (auto& [name, child] : children) register_module(name, child);
  }
  Tensor forward(const Tensor& x) override { return fn(x); }
};

/// Makes the inputs of one run at a batch size.
using MakeInputs = std::function<std::vector<Tensor>(std::int64_t batch)>;

/// A fixture that skips (or, with KILN_REQUIRE_ONNX_RUNTIME=1, fails) without ONNX Runtime.
class OnnxRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override;

  /// Exports `forward` (at batch 3, batch axis dynamic) to a file named after the test, runs it
  /// in ONNX Runtime at batch 1 and 37 and expects every output within `tolerance` of Kiln's
  /// own eval-mode result (max relative error, printed). Returns the file's path.
  std::string expect_runtime_agrees(nn::Module& module, const onnx::Forward& forward, const MakeInputs& inputs,
                                    double tolerance = 1e-5);
  /// The same for a module's one-tensor forward.
  std::string expect_runtime_agrees(nn::Module& module, const std::function<Tensor(std::int64_t)>& input,
                                    double tolerance = 1e-5);
};

}  // namespace kiln::testing
