// tests/examples/test_resume.cpp — a training run killed with SIGKILL and resumed with
// --resume ends with the same bytes as a run never stopped (Note [Exact resumption]). Each case
// forks a real training process (a gtest death test, re-executed from scratch) that kills
// itself at one point — inside an epoch, at an epoch boundary, or in the middle of writing a
// checkpoint — then resumes in this process and compares the final checkpoint file with an
// uninterrupted run's, byte for byte. For SGD, Adam and AdamW (with the cosine schedule), with
// and without DataLoader workers, and once under autocast with a GradScaler, on a model with
// dropout so the generator state matters.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../../examples/support/models.h"
#include "../../examples/support/training.h"

namespace kiln::examples {
namespace {

namespace fs = std::filesystem;

struct DropoutMlp : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::Dropout> drop;
  DropoutMlp() : Module("DropoutMlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(784, 32));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 10));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(drop->forward(fc1->forward(x).relu())); }
};

/// `count` noisy images of ten fixed patterns (as in test_training_smoke.cpp).
std::shared_ptr<data::Dataset> patterns(std::int64_t count, std::uint64_t seed) {
  manual_seed(1234);
  const Tensor templates = rand({10, 1, 28, 28});
  manual_seed(seed);
  const Tensor labels = randint(0, 10, {count});
  const Tensor images = (templates.index_select(0, labels) * 0.5 + rand({count, 1, 28, 28}) * 0.5).clamp(0.0, 1.0);
  return std::make_shared<data::TensorDataset>(images, labels);
}

struct Case {
  const char* optimizer;
  std::size_t workers;
  bool mixed_precision = false;  // CPU autocast with an enabled GradScaler, whose state resumes too
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(info.param.optimizer) + "_workers" + std::to_string(info.param.workers) +
         (info.param.mixed_precision ? "_autocast" : "");
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name({c, 0}); }

class ResumeAfterKill : public ::testing::TestWithParam<Case> {
 protected:
  /// 160 samples in batches of 32: 5 steps an epoch, 15 in all.
  TrainConfig config(const fs::path& dir) const {
    TrainConfig c;
    c.epochs = 3;
    c.batch_size = 32;
    c.lr = std::string(GetParam().optimizer) == "sgd" ? 0.05 : 2e-3;
    c.optimizer = GetParam().optimizer;
    c.seed = 5;
    c.workers = GetParam().workers;
    c.mixed_precision = GetParam().mixed_precision;
    c.checkpoint_dir = dir.string();
    return c;
  }

  /// One training process's worth: the data, the seeded model, train().
  static void run(const TrainConfig& c) {
    auto train_set = patterns(160, 1), test_set = patterns(64, 2);
    manual_seed(c.seed);
    DropoutMlp model;
    train(model, train_set, test_set, c, [](const Tensor& x) { return normalize_fashion(x).flatten(1); });
  }

  static fs::path fresh(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("kiln_resume_" + name);
    fs::remove_all(dir);
    return dir;
  }

  static std::string bytes(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }

  /// Resumes the killed run in `dir`, runs an uninterrupted one beside it, and compares their
  /// final checkpoints.
  void expect_resume_matches_uninterrupted(const fs::path& dir, const std::string& expected_newest) {
    checkpoint::CheckpointDir killed(dir.string());
    ASSERT_FALSE(killed.list().empty());
    EXPECT_EQ(fs::path(killed.list().back()).filename(), expected_newest);

    TrainConfig resume = config(dir);
    resume.resume = true;
    run(resume);
    const fs::path reference_dir = fresh(dir.filename().string() + "_reference");
    run(config(reference_dir));

    const std::string resumed_final = killed.list().back();
    const std::string reference_final = checkpoint::CheckpointDir(reference_dir.string()).list().back();
    EXPECT_EQ(fs::path(resumed_final).filename(), "checkpoint-000000000015.safetensors");
    EXPECT_EQ(fs::path(reference_final).filename(), "checkpoint-000000000015.safetensors");
    const std::string a = bytes(resumed_final), b = bytes(reference_final);
    EXPECT_GT(a.size(), 100000u);
    EXPECT_TRUE(a == b) << "the resumed run's final checkpoint differs from the uninterrupted run's";
    fs::remove_all(reference_dir);
  }
};

TEST_P(ResumeAfterKill, InsideAnEpoch) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = fresh(std::string("inside_") + case_name({GetParam(), 0}));
  TrainConfig c = config(dir);
  c.checkpoint_every = 4;  // checkpoints at steps 4 and 8; killed after step 7, in epoch 2
  c.after_step = [](std::int64_t step) {
    if (step == 7) std::raise(SIGKILL);
  };
  EXPECT_EXIT(run(c), ::testing::KilledBySignal(SIGKILL), "");
  expect_resume_matches_uninterrupted(dir, "checkpoint-000000000004.safetensors");
  fs::remove_all(dir);
}

TEST_P(ResumeAfterKill, AtAnEpochBoundary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = fresh(std::string("boundary_") + case_name({GetParam(), 0}));
  TrainConfig c = config(dir);
  c.after_epoch = [](std::int64_t epoch) {  // epoch 2's checkpoint (step 10) is written
    if (epoch == 2) std::raise(SIGKILL);
  };
  EXPECT_EXIT(run(c), ::testing::KilledBySignal(SIGKILL), "");
  expect_resume_matches_uninterrupted(dir, "checkpoint-000000000010.safetensors");
  fs::remove_all(dir);
}

TEST_P(ResumeAfterKill, DuringACheckpointWrite) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = fresh(std::string("write_") + case_name({GetParam(), 0}));
  TrainConfig c = config(dir);
  c.before_checkpoint_publish = [writes = 0](const std::string&) mutable {
    if (++writes == 2) std::raise(SIGKILL);  // epoch 2's checkpoint: written, not yet renamed
  };
  EXPECT_EXIT(run(c), ::testing::KilledBySignal(SIGKILL), "");
  bool temporary_left = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    temporary_left |= e.path().filename().string().find(".tmp.") != std::string::npos;
  }
  EXPECT_TRUE(temporary_left);
  expect_resume_matches_uninterrupted(dir, "checkpoint-000000000005.safetensors");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ResumeAfterKill,
                         ::testing::Values(Case{"sgd", 0}, Case{"sgd", 2}, Case{"adam", 0}, Case{"adam", 2},
                                           Case{"adamw", 0}, Case{"adamw", 2}, Case{"adam", 2, true}),
                         case_name);

// Without a checkpoint to resume from, --resume starts fresh (and says so).
TEST(Resume, WithNoValidCheckpointStartsFresh) {
  const fs::path dir = fs::temp_directory_path() / "kiln_resume_nothing";
  fs::remove_all(dir);
  TrainConfig c;
  c.epochs = 1;
  c.batch_size = 32;
  c.optimizer = "sgd";
  c.lr = 0.05;
  c.checkpoint_dir = dir.string();
  c.resume = true;
  auto train_set = patterns(64, 1);
  manual_seed(0);
  DropoutMlp model;
  ::testing::internal::CaptureStdout();
  const TrainResult r = train(model, train_set, train_set, c, [](const Tensor& x) { return x.flatten(1); });
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("no valid checkpoint in " + dir.string() + ": starting fresh"), std::string::npos);
  EXPECT_EQ(r.train_losses.size(), 1u);
  EXPECT_EQ(checkpoint::CheckpointDir(dir.string()).list().size(), 1u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::examples
