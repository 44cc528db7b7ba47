// tests/onnx/onnx_runtime.cpp — running exported models in ONNX Runtime (see onnx_runtime.h).
#include "onnx/onnx_runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "support/test_util.h"

namespace kiln::testing {

namespace {

namespace fs = std::filesystem;

std::string python() {
  const char* chosen = std::getenv("KILN_ONNX_PYTHON");
  return chosen && *chosen ? chosen : KILN_ONNX_PYTHON;
}

bool required() {
  const char* r = std::getenv("KILN_REQUIRE_ONNX_RUNTIME");
  return r && std::string(r) == "1";
}

/// Where a test's files go: a folder named after the running test.
fs::path test_folder() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path folder = fs::current_path() / "onnx_files" / (std::string(info->test_suite_name()) + "." + info->name());
  fs::create_directories(folder);
  return folder;
}

}  // namespace

std::string onnx_runtime_missing() {
  static const std::string why = [] {
    const std::string py = python();
    if (!fs::exists(py)) {
      return "ONNX Runtime is not installed: no " + py + " (run scripts/onnx_runtime.sh)";
    }
    const std::string command = "'" + py + "' -c 'import onnxruntime, numpy' > /dev/null 2>&1";
    if (std::system(command.c_str()) != 0) return py + " cannot import onnxruntime and numpy (run scripts/onnx_runtime.sh)";
    return std::string();
  }();
  return why;
}

std::vector<std::vector<Tensor>> run_in_onnx_runtime(const std::string& path,
                                                     const std::vector<std::vector<Tensor>>& runs) {
  const fs::path folder = fs::path(path).parent_path();
  std::string command = "'" + python() + "' '" + KILN_ONNX_RUNNER + "' '" + path + "'";
  std::vector<std::size_t> output_counts;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    std::string ins;
    for (std::size_t i = 0; i < runs[r].size(); ++i) {
      const fs::path in = folder / ("run" + std::to_string(r) + "_in" + std::to_string(i) + ".npy");
      save_npy(in.string(), runs[r][i].contiguous());
      if (i > 0) ins += ',';
      ins += in.string();
    }
    // Outputs: up to four per run; the runner writes as many as the model has.
    std::string outs;
    for (int o = 0; o < 4; ++o) {
      const fs::path out = folder / ("run" + std::to_string(r) + "_out" + std::to_string(o) + ".npy");
      fs::remove(out);
      if (o > 0) outs += ',';
      outs += out.string();
    }
    command += " '" + ins + "=" + outs + "'";
  }
  const fs::path errors = folder / "runtime_errors.txt";
  command += " 2> '" + errors.string() + "'";
  const int status = std::system(command.c_str());
  KILN_CHECK(status == 0, "ONNX Runtime failed on ", path, ":\n", read_text(errors));
  std::vector<std::vector<Tensor>> results(runs.size());
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (int o = 0; o < 4; ++o) {
      const fs::path out = folder / ("run" + std::to_string(r) + "_out" + std::to_string(o) + ".npy");
      if (fs::exists(out)) results[r].push_back(load_npy(out.string()));
    }
  }
  return results;
}

double max_relative_error(const Tensor& actual, const Tensor& expected) {
  if (actual.sizes() != expected.sizes()) return std::numeric_limits<double>::infinity();
  const std::vector<double> a = values(actual), b = values(expected);
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
  return scale == 0 ? diff : diff / scale;
}

void OnnxRuntimeTest::SetUp() {
  const std::string why = onnx_runtime_missing();
  if (why.empty()) return;
  if (required()) FAIL() << why << " (KILN_REQUIRE_ONNX_RUNTIME=1)";
  GTEST_SKIP() << why;
}

std::string OnnxRuntimeTest::expect_agreement(nn::Module& module, const onnx::Forward& forward,
                                              const MakeSequenceInputs& inputs, std::int64_t example_length,
                                              const onnx::ExportOptions& options,
                                              const std::vector<std::pair<std::int64_t, std::int64_t>>& points,
                                              double tolerance) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string path = (test_folder() / (std::string(info->name()) + ".onnx")).string();
  const auto start = std::chrono::steady_clock::now();
  onnx::export_function(forward, module, inputs(3, example_length), path, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  module.eval();
  std::vector<std::vector<Tensor>> runs, expected;
  {
    NoGradGuard no_grad;
    for (const auto& [batch, length] : points) {
      runs.push_back(inputs(batch, length));
      expected.push_back(forward(runs.back()));
    }
  }
  const std::vector<std::vector<Tensor>> got = run_in_onnx_runtime(path, runs);
  std::string report;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const auto [batch, length] = points[r];
    std::string at = "batch " + std::to_string(batch);
    if (length > 0) at += " length " + std::to_string(length);
    EXPECT_EQ(got[r].size(), expected[r].size()) << "outputs at " << at;
    for (std::size_t o = 0; o < std::min(got[r].size(), expected[r].size()); ++o) {
      const double error = max_relative_error(got[r][o], expected[r][o].to(got[r][o].dtype()));
      EXPECT_LE(error, tolerance) << "output " << o << " at " << at << ": ONNX Runtime " << got[r][o].sizes()
                                  << ", Kiln " << expected[r][o].sizes();
      char line[96];
      if (expected[r].size() == 1) std::snprintf(line, sizeof line, " %s: %.2e", at.c_str(), error);
      else std::snprintf(line, sizeof line, " %s output %zu: %.2e", at.c_str(), o, error);
      report += line;
    }
  }
  std::printf("[onnx] %s: export %.3f s, max relative error%s\n", info->name(), seconds, report.c_str());
  return path;
}

std::string OnnxRuntimeTest::expect_runtime_agrees(nn::Module& module, const onnx::Forward& forward,
                                                   const MakeInputs& inputs, double tolerance) {
  return expect_agreement(
      module, forward, [&inputs](std::int64_t batch, std::int64_t) { return inputs(batch); }, 0,
      {.dynamic_axes = {"batch"}}, {{1, 0}, {37, 0}}, tolerance);
}

std::string OnnxRuntimeTest::expect_runtime_agrees_over_sequences(nn::Module& module, const onnx::Forward& forward,
                                                                  const MakeSequenceInputs& inputs,
                                                                  const std::vector<std::int64_t>& batch_dims,
                                                                  double tolerance) {
  return expect_agreement(module, forward, inputs, 6, {.dynamic_axes = {"batch", "sequence"}, .batch_dims = batch_dims},
                          {{1, 2}, {1, 9}, {37, 2}, {37, 9}}, tolerance);
}

std::string OnnxRuntimeTest::expect_runtime_agrees(nn::Module& module,
                                                   const std::function<Tensor(std::int64_t)>& input, double tolerance) {
  return expect_runtime_agrees(
      module, [&module](const std::vector<Tensor>& x) { return std::vector<Tensor>{module.forward(x[0])}; },
      [&input](std::int64_t b) { return std::vector<Tensor>{input(b)}; }, tolerance);
}

}  // namespace kiln::testing
