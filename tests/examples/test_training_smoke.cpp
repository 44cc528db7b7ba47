// tests/examples/test_training_smoke.cpp — the examples' training loop, models and
// optimizers end to end on a tiny synthetic set (seconds, not minutes): ten classes, each a
// fixed random 28x28 pattern seen through noise. Training must lower the loss and beat chance
// by far; the full Fashion-MNIST runs are examples and benchmarks, not tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../../examples/support/models.h"
#include "../../examples/support/training.h"

namespace kiln::examples {
namespace {

/// `count` noisy images of ten fixed patterns, labelled by pattern.
std::shared_ptr<data::Dataset> patterns(std::int64_t count, std::uint64_t seed) {
  manual_seed(1234);  // the same ten patterns for every split
  const Tensor templates = rand({10, 1, 28, 28});
  manual_seed(seed);
  const Tensor labels = randint(0, 10, {count});
  const Tensor images = (templates.index_select(0, labels) * 0.5 + rand({count, 1, 28, 28}) * 0.5).clamp(0.0, 1.0);
  return std::make_shared<data::TensorDataset>(images, labels);
}

TrainConfig quick(std::int64_t epochs, const std::string& optimizer, double lr) {
  TrainConfig c;
  c.epochs = epochs;
  c.batch_size = 32;
  c.lr = lr;
  c.optimizer = optimizer;
  return c;
}

TEST(TrainingSmoke, MlpWithSgdLearnsThePatterns) {
  manual_seed(0);
  Mlp model;
  const TrainResult r = train(model, patterns(512, 1), patterns(256, 2), quick(3, "sgd", 0.05),
                              [](const Tensor& x) { return normalize_fashion(x).flatten(1); });
  ASSERT_EQ(r.train_losses.size(), 3u);
  EXPECT_LT(r.train_losses.back(), 0.5 * r.train_losses.front());
  EXPECT_GT(r.test_accuracy, 0.9);  // chance is 0.1
}

TEST(TrainingSmoke, CnnWithAdamWLearnsAndWritesItsLogAndCheckpoint) {
  manual_seed(0);
  Cnn model;
  const auto dir = std::filesystem::temp_directory_path() / "kiln_training_smoke";
  std::filesystem::create_directories(dir);
  TrainConfig c = quick(4, "adamw", 2e-3);
  c.log = (dir / "cnn.csv").string();
  c.checkpoint = (dir / "cnn.safetensors").string();
  const TrainResult r = train(model, patterns(512, 3), patterns(128, 4), c, normalize_fashion);
  ASSERT_EQ(r.train_losses.size(), 4u);
  EXPECT_LT(r.train_losses.back(), r.train_losses.front());
  EXPECT_GT(r.test_accuracy, 0.5);

  // The log has a header and one row per epoch; the checkpoint loads back into a fresh model
  // that then predicts exactly as the trained one.
  std::ifstream log(c.log);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(log, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "epoch,train_loss,test_loss,test_accuracy,seconds,samples_per_second");
  Cnn restored;
  restored.load_state_dict(load(c.checkpoint));
  const Tensor x = normalize_fashion(rand({4, 1, 28, 28}));
  NoGradGuard no_grad;
  model.eval();
  restored.eval();
  EXPECT_TRUE(equal(model.forward(x), restored.forward(x)));
  std::filesystem::remove_all(dir);
}

TEST(TrainingSmoke, PlanPrintsTheStepsMemoryAndTrainsNothing) {
  manual_seed(0);
  Mlp model;
  const StateDict before = model.state_dict();
  TrainConfig c = quick(1, "adam", 1e-3);
  c.plan = true;
  testing::internal::CaptureStdout();
  const TrainResult r = train(model, patterns(64, 1), patterns(32, 2), c,
                              [](const Tensor& x) { return normalize_fashion(x).flatten(1); });
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(r.train_losses.empty());
  EXPECT_NE(out.find("Peak allocated memory"), std::string::npos) << out;
  EXPECT_NE(out.find("planned, not run"), std::string::npos) << out;
  for (const auto& [name, t] : model.state_dict()) EXPECT_TRUE(equal(t, before.at(name))) << name;
}

TEST(TrainingSmoke, AutoBatchSizeTakesTheLargestThatFitsUpToTheDataset) {
  manual_seed(0);
  Mlp model;
  TrainConfig c = quick(1, "sgd", 0.05);
  c.batch_size = 0;  // --batch-size auto
  testing::internal::CaptureStdout();
  const TrainResult r = train(model, patterns(200, 1), patterns(32, 2), c,
                              [](const Tensor& x) { return normalize_fashion(x).flatten(1); });
  const std::string out = testing::internal::GetCapturedStdout();
  // A 200-sample set fits in memory many times over: one batch of all of it.
  EXPECT_NE(out.find("--batch-size auto: 200,"), std::string::npos) << out;
  EXPECT_NE(out.find("batch 200,"), std::string::npos) << out;
  EXPECT_EQ(r.train_losses.size(), 1u);
}

}  // namespace
}  // namespace kiln::examples
