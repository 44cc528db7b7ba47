// tests/onnx/test_export_programs.cpp — `train_mlp --export-onnx FILE` and `train_cnn
// --export-onnx FILE`, run as a user runs them on a small Fashion-MNIST-like folder: the file
// takes "input" [N, 1, 28, 28] pixels with a dynamic batch and gives "logits" [N, 10], which
// ONNX Runtime computes as the trained model (read back from the program's --checkpoint) does.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "examples/program_runner.h"
#include "examples/support/charlm.h"
#include "examples/support/models.h"
#include "onnx/onnx_runtime.h"
#include "support/fashion_files.h"
#include "support/test_util.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

class OnnxPrograms : public OnnxRuntimeTest {
 protected:
  void SetUp() override {
    OnnxRuntimeTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (examples_dir().empty()) GTEST_SKIP() << "the example programs are not built (KILN_BUILD_EXAMPLES=OFF)";
    root_ = fs::temp_directory_path() /
            ("kiln_onnx_programs_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    write_fashion_files(root_ / "data", 128, 64);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }

  /// Trains `program` briefly with --export-onnx and --checkpoint, then runs the file in ONNX
  /// Runtime at batch 1 and 37 against `Model` loaded from the checkpoint.
  template <class Model>
  void expect_exported_model_agrees(const std::string& program, const std::function<Tensor(const Tensor&)>& input) {
    const fs::path onnx_file = root_ / "model.onnx", weights = root_ / "model.safetensors";
    const ProgramRun run = run_example(program, {"--data", (root_ / "data").string(), "--epochs", "1", "--batch-size",
                                                 "32", "--threads", "1", "--export-onnx", onnx_file.string(),
                                                 "--checkpoint", weights.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("ONNX model written to " + onnx_file.string()), std::string::npos) << run.out;
    Model model;
    model.load_state_dict(load(weights.string()));
    model.eval();
    std::vector<std::vector<Tensor>> runs;
    std::vector<Tensor> expected;
    {
      NoGradGuard no_grad;
      for (std::int64_t n : {1, 37}) {
        runs.push_back({rand({n, 1, 28, 28})});
        expected.push_back(model.forward(input(runs.back()[0])));
      }
    }
    const auto got = run_in_onnx_runtime(onnx_file.string(), runs);
    for (std::size_t r = 0; r < runs.size(); ++r) {
      ASSERT_EQ(got[r].size(), 1u);
      const double error = max_relative_error(got[r][0], expected[r]);
      std::printf("[onnx] %s --export-onnx: batch %lld max relative error %.2e\n", program.c_str(),
                  static_cast<long long>(runs[r][0].size(0)), error);
      EXPECT_LE(error, 1e-5) << "batch " << runs[r][0].size(0);
    }
  }

  fs::path root_;
};

TEST_F(OnnxPrograms, TrainMlpExportsItsPredictionPath) {
  expect_exported_model_agrees<examples::Mlp>(
      "train_mlp", [](const Tensor& images) { return examples::normalize_fashion(images).flatten(1); });
}

TEST_F(OnnxPrograms, TrainCnnExportsItsPredictionPath) {
  expect_exported_model_agrees<examples::Cnn>("train_cnn",
                                              [](const Tensor& images) { return examples::normalize_fashion(images); });
}

// train_charlm --export-onnx: Int64 ids [N, context] in, logits [N, context, vocabulary] out,
// the vocabulary in the file's metadata; both models, briefly trained.
TEST_F(OnnxPrograms, TrainCharlmExportsBothModelsWithTheirVocabulary) {
  const fs::path text = root_ / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "the cat sat on the mat. a dog ran far.\n";
  }
  for (const std::string kind : {"transformer", "lstm"}) {
    SCOPED_TRACE(kind);
    const fs::path onnx_file = root_ / (kind + ".onnx"), weights = root_ / (kind + ".safetensors");
    const ProgramRun run = run_example(
        "train_charlm", {"--text", text.string(), "--model", kind, "--steps", "3", "--context", "16", "--width", "16",
                         "--layers", "1", "--heads", "2", "--hidden", "16", "--batch-size", "4", "--eval-every", "2",
                         "--threads", "1", "--export-onnx", onnx_file.string(), "--checkpoint", weights.string()});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("ONNX model written to " + onnx_file.string()), std::string::npos) << run.out;
    const auto [model, vocabulary] = examples::load_charlm(weights.string(), kCPU);
    model->eval();

    ::onnx::ModelProto proto;
    std::ifstream in(onnx_file, std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&in));
    std::string listed;
    for (const auto& entry : proto.metadata_props()) {
      if (entry.key() == "vocabulary") listed = entry.value();
    }
    EXPECT_EQ(listed, vocabulary.list());

    std::vector<std::vector<Tensor>> runs;
    std::vector<Tensor> expected;
    {
      NoGradGuard no_grad;
      for (std::int64_t n : {1, 37}) {
        runs.push_back({randint(0, vocabulary.size(), {n, 16})});
        expected.push_back(model->forward(runs.back()[0]));
      }
    }
    const auto got = run_in_onnx_runtime(onnx_file.string(), runs);
    for (std::size_t r = 0; r < runs.size(); ++r) {
      ASSERT_EQ(got[r].size(), 1u);
      const double error = max_relative_error(got[r][0], expected[r]);
      std::printf("[onnx] train_charlm --model %s --export-onnx: batch %lld max relative error %.2e\n", kind.c_str(),
                  static_cast<long long>(runs[r][0].size(0)), error);
      EXPECT_LE(error, 1e-5) << "batch " << runs[r][0].size(0);
    }
  }
}

// The deployment target: a trained train_cnn, exported and run in ONNX Runtime, makes
// the same prediction as Kiln for every one of Fashion-MNIST's 10,000 test images. Needs
// Debian's dataset-fashion-mnist; a short run (2,000 samples, one epoch) is trained enough.
TEST_F(OnnxPrograms, TrainedCnnPredictsTheWholeTestSetAsKilnDoes) {
  const std::string data_root = data::default_fashion_mnist_root();
  if (!fs::exists(data_root + "/t10k-images-idx3-ubyte.gz") && !fs::exists(data_root + "/t10k-images-idx3-ubyte")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << data_root << " (Debian: dataset-fashion-mnist)";
  }
  const fs::path onnx_file = root_ / "cnn.onnx", weights = root_ / "cnn.safetensors";
  const ProgramRun run =
      run_example("train_cnn", {"--data", data_root, "--epochs", "1", "--limit", "2000", "--batch-size", "64",
                                "--export-onnx", onnx_file.string(), "--checkpoint", weights.string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  examples::Cnn model;
  model.load_state_dict(load(weights.string()));
  model.eval();
  const auto test_set = data::FashionMNIST::load(false, data_root);
  std::vector<std::vector<Tensor>> runs;
  std::vector<Tensor> kiln_predictions;
  {
    NoGradGuard no_grad;
    for (std::size_t first = 0; first < test_set->size(); first += 1000) {
      std::vector<std::size_t> indices;
      for (std::size_t i = first; i < std::min(first + 1000, test_set->size()); ++i) indices.push_back(i);
      const Tensor images = test_set->get_batch(indices).data;
      runs.push_back({images});
      kiln_predictions.push_back(model.forward(examples::normalize_fashion(images)).argmax(1));
    }
  }
  const auto got = run_in_onnx_runtime(onnx_file.string(), runs);
  std::int64_t same = 0, total = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    ASSERT_EQ(got[r].size(), 1u);
    same += (got[r][0].argmax(1) == kiln_predictions[r]).sum().item<std::int64_t>();
    total += kiln_predictions[r].numel();
  }
  std::printf("[onnx] train_cnn on Fashion-MNIST: %lld of %lld test predictions equal in ONNX Runtime\n",
              static_cast<long long>(same), static_cast<long long>(total));
  EXPECT_EQ(total, 10000);
  EXPECT_EQ(same, total);
}

}  // namespace
}  // namespace kiln::testing
