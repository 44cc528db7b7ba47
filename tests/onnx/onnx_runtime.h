// tests/onnx/onnx_runtime.h — the ONNX export tests' oracle: a model Kiln exported is run in
// ONNX Runtime (tests/onnx/run_onnx.py, in the virtual environment scripts/onnx_runtime.sh
// makes under the build folder) and its outputs compared with Kiln's eval-mode outputs at
// batch 1 and batch 37, the file having been exported at batch 3 with a dynamic batch axis
// (and, for the recurrent layers, at sequence lengths 2 and 9 as well, exported at 6).
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

/// Makes the inputs of one run at a batch size and a sequence length.
using MakeSequenceInputs = std::function<std::vector<Tensor>(std::int64_t batch, std::int64_t length)>;

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
  /// The same with the sequence axis dynamic too: exported at batch 3 and length 6 with
  /// dynamic_axes {"batch", "sequence"} (input i's batch is its dim batch_dims[i]), run at
  /// batch 1 and 37 each at length 2 and 9.
  std::string expect_runtime_agrees_over_sequences(nn::Module& module, const onnx::Forward& forward,
                                                   const MakeSequenceInputs& inputs,
                                                   const std::vector<std::int64_t>& batch_dims,
                                                   double tolerance = 1e-5);

 private:
  /// Exports `forward` at `example` (batch 3) with `options`, runs it in ONNX Runtime at each
  /// (batch, length) of `points` and compares with Kiln.
  std::string expect_agreement(nn::Module& module, const onnx::Forward& forward, const MakeSequenceInputs& inputs,
                               std::int64_t example_length, const onnx::ExportOptions& options,
                               const std::vector<std::pair<std::int64_t, std::int64_t>>& points, double tolerance);
};

}  // namespace kiln::testing
