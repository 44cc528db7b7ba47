// tests/checkpoint/test_checkpoint_dir.cpp — a checkpoint folder: every piece of a run comes
// back exactly, only the newest keep_last stay, a truncated, corrupted or edited newest
// checkpoint (data, tensor names or metadata) is skipped (with a warning naming it) for the
// one before, a folder holding another run's checkpoints is never written into by accident,
// and a checkpoint that does not fit the program is an error, never a silent fallback.
#include <filesystem>
#include <fstream>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;
namespace fs = std::filesystem;

namespace {

/// A fresh, empty folder per test.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_checkpoint_" + name);
  fs::remove_all(dir);
  return dir;
}

/// A small run's pieces, built the same way every time from `seed`.
struct SmallRun {
  explicit SmallRun(std::uint64_t seed) : loader(kiln::testing::numbers(20), {.batch_size = 3, .shuffle = true, .seed = 5}) {
    manual_seed(seed);
    model = std::make_shared<nn::Linear>(3, 2);
    opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(0.1));
    schedule = std::make_unique<optim::StepLR>(*opt, 2, 0.5);
  }
  void train_steps(int n) {
    for (int i = 0; i < n; ++i) {
      opt->zero_grad();
      (model->forward(rand({4, 3})) * randn({4, 2})).sum().backward();
      opt->step();
      schedule->step();
    }
  }
  checkpoint::TrainingState state() {
    return {.model = model.get(), .optimizer = opt.get(), .scheduler = schedule.get(), .scaler = &scaler,
            .loader = &loader, .values = {{"epoch", "3"}, {"loss_sum", "0.125"}}};
  }
  std::shared_ptr<nn::Linear> model;
  std::unique_ptr<optim::Adam> opt;
  std::unique_ptr<optim::StepLR> schedule;
  amp::GradScaler scaler{{.init_scale = 1024.0}};
  data::DataLoader loader;
};

/// Collects warnings for the test's lifetime.
struct Warnings {
  Warnings() {
    previous = set_warning_handler([this](const std::string& m) { messages.push_back(m); });
  }
  ~Warnings() { set_warning_handler(previous); }
  WarningHandler previous;
  std::vector<std::string> messages;
};

std::vector<std::vector<double>> epoch_targets(data::DataLoader& loader) {
  std::vector<std::vector<double>> out;
  for (const data::Example& b : loader) out.push_back(values(b.target));
  return out;
}

void corrupt_one_data_byte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-5, std::ios::end);
  const char c = static_cast<char>(f.get());
  f.seekp(-5, std::ios::end);
  f.put(static_cast<char>(c ^ 0x5a));
}

TEST(CheckpointDir, ResumeRestoresEveryPieceExactly) {
  const fs::path dir = fresh_dir("every_piece");
  SmallRun a(1);
  a.train_steps(3);
  int taken = 0;
  for (const data::Example& b : a.loader) {
    if (++taken == 2) break;
    (void)b;
  }
  checkpoint::CheckpointDir(dir.string()).save(3, a.state());
  const Tensor next_draw = rand({5});  // what the generator gives after the checkpoint

  SmallRun b(99);  // other weights, other generator position
  checkpoint::TrainingState state = b.state();
  state.values.clear();
  const auto path = checkpoint::CheckpointDir(dir.string()).resume(state);
  ASSERT_TRUE(path.has_value());
  EXPECT_EQ(fs::path(*path).filename(), "checkpoint-000000000003.safetensors");
  EXPECT_EQ(state.values.at("epoch"), "3");
  EXPECT_EQ(state.values.at("loss_sum"), "0.125");
  EXPECT_TRUE(equal(b.model->weight, a.model->weight));
  EXPECT_EQ(b.schedule->last_epoch(), a.schedule->last_epoch());
  EXPECT_EQ(b.opt->param_groups()[0].options->lr, a.opt->param_groups()[0].options->lr);
  EXPECT_EQ(b.scaler.get_scale(), 1024.0);
  EXPECT_TRUE(equal(rand({5}), next_draw));
  // Both continue identically: the optimizer's moments came along...
  // (One process-wide generator: each continuation starts from the same stream position.)
  const Tensor stream = get_rng_state();
  a.train_steps(2);
  set_rng_state(stream);
  b.train_steps(2);
  EXPECT_TRUE(equal(b.model->weight, a.model->weight));
  EXPECT_TRUE(equal(b.model->bias, a.model->bias));
  // ...and the loader continues epoch 0 after its first two batches.
  data::DataLoader fresh(kiln::testing::numbers(20), {.batch_size = 3, .shuffle = true, .seed = 5});
  std::vector<std::vector<double>> epoch0 = epoch_targets(fresh);
  epoch0.erase(epoch0.begin(), epoch0.begin() + 2);
  EXPECT_EQ(epoch_targets(b.loader), epoch0);
}

TEST(CheckpointDir, KeepsTheNewestAndNoTemporaryFiles) {
  const fs::path dir = fresh_dir("keep");
  SmallRun run(1);
  checkpoint::CheckpointDir checkpoints(dir.string(), {.keep_last = 2});
  std::ofstream(dir / "checkpoint-000000000004.safetensors.tmp.12345") << "left by a killed run";
  for (std::int64_t step : {1, 5, 12}) checkpoints.save(step, run.state());
  const std::vector<std::string> kept = checkpoints.list();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(fs::path(kept[0]).filename(), "checkpoint-000000000005.safetensors");
  EXPECT_EQ(fs::path(kept[1]).filename(), "checkpoint-000000000012.safetensors");
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);  // the stale temporary file is gone too
}

TEST(CheckpointDir, ACorruptNewestCheckpointIsSkippedForThePreviousOne) {
  const fs::path dir = fresh_dir("corrupt");
  checkpoint::CheckpointDir checkpoints(dir.string(), {.keep_last = 0});
  SmallRun run(1);
  for (std::int64_t step : {10, 20, 30}) {
    run.train_steps(1);  // each checkpoint holds other weights
    checkpoints.save(step, run.state());
  }
  // The newest is truncated (a copy cut short), the one before has a flipped data byte.
  const std::vector<std::string> files = checkpoints.list();
  fs::resize_file(files[2], fs::file_size(files[2]) - 100);
  corrupt_one_data_byte(files[1]);

  Warnings warnings;
  SmallRun other(2);
  checkpoint::TrainingState state = other.state();
  const auto path = checkpoints.resume(state);
  ASSERT_TRUE(path.has_value());
  EXPECT_EQ(*path, files[0]);
  ASSERT_EQ(warnings.messages.size(), 2u);
  EXPECT_NE(warnings.messages[0].find("skipping an unusable checkpoint: checkpoint '" + files[2] + "'"), std::string::npos);
  EXPECT_NE(warnings.messages[0].find("fall outside the"), std::string::npos) << warnings.messages[0];
  EXPECT_NE(warnings.messages[1].find("skipping an unusable checkpoint: checkpoint '" + files[1] + "'"), std::string::npos);
  EXPECT_NE(warnings.messages[1].find("do not match its checksum"), std::string::npos) << warnings.messages[1];
  // Both were moved aside, so the resumed run's own checkpoints outrank nothing stale.
  EXPECT_TRUE(fs::exists(files[2] + ".unusable"));
  EXPECT_TRUE(fs::exists(files[1] + ".unusable"));
  EXPECT_EQ(checkpoints.list(), std::vector<std::string>{files[0]});

  // With every checkpoint unusable there is nothing to resume from.
  corrupt_one_data_byte(files[0]);
  EXPECT_FALSE(checkpoints.resume(state).has_value());
  EXPECT_FALSE(checkpoint::CheckpointDir(fresh_dir("empty").string()).resume(state).has_value());
}

TEST(CheckpointDir, ACheckpointThatDoesNotFitIsAnErrorNotAFallback) {
  const fs::path dir = fresh_dir("mismatch");
  checkpoint::CheckpointDir checkpoints(dir.string());
  SmallRun run(1);
  checkpoints.save(1, run.state());
  // Another model shape: the program changed, not the file.
  nn::Linear wider(3, 4);
  optim::Adam opt(wider.parameters(), optim::AdamOptions(0.1));
  checkpoint::TrainingState state{.model = &wider, .optimizer = &opt, .scheduler = run.schedule.get(),
                                  .scaler = &run.scaler, .loader = &run.loader};
  EXPECT_ERROR(checkpoints.resume(state), "size mismatch for weight");
  // A piece the checkpoint lacks, and a piece the program lacks.
  checkpoint::TrainingState no_scheduler = run.state();
  no_scheduler.scheduler = nullptr;
  EXPECT_ERROR(checkpoints.resume(no_scheduler), "it holds LR scheduler state, but no LR scheduler was given");
  checkpoints.save(2, no_scheduler);
  EXPECT_ERROR(checkpoints.resume(state = run.state()),
               "a LR scheduler was given to restore, but the checkpoint holds no LR scheduler state");
  // Mixed precision in one run only.
  amp::GradScaler disabled({.enabled = false});
  checkpoint::TrainingState other_scaler = run.state();
  other_scaler.scheduler = nullptr;
  other_scaler.scaler = &disabled;
  EXPECT_ERROR(checkpoints.resume(other_scaler), "the GradScaler was enabled when saved but is disabled here");
}

TEST(CheckpointDir, AWriteInterruptedBeforeItsRenameLeavesThePreviousCheckpoint) {
  const fs::path dir = fresh_dir("interrupted");
  SmallRun run(1);
  checkpoint::CheckpointDir good(dir.string());
  good.save(1, run.state());
  std::string unpublished;
  // (overwrite: a second CheckpointDir on a folder with checkpoints must say what it replaces.)
  checkpoint::CheckpointDir failing(dir.string(), {.overwrite = true, .before_publish = [&](const std::string& tmp) {
                                                    unpublished = tmp;
                                                    throw std::runtime_error("power cut");
                                                  }});
  EXPECT_THROW(failing.save(2, run.state()), std::runtime_error);
  EXPECT_TRUE(fs::exists(unpublished));  // the bytes were written, under a temporary name
  ASSERT_EQ(good.list().size(), 1u);
  checkpoint::TrainingState state = run.state();
  EXPECT_EQ(fs::path(good.resume(state).value()).filename(), "checkpoint-000000000001.safetensors");
}

/// Replaces the first occurrence of `from` in a file's bytes by `to` (of the same length).
void edit_bytes(const fs::path& file, const std::string& from, const std::string& to) {
  ASSERT_EQ(from.size(), to.size());
  std::ifstream in(file, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  in.close();
  const std::size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  bytes.replace(at, from.size(), to);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

// Issue 31: a header or metadata byte edited after the write (a loop counter, a tensor name)
// made the checkpoint resume into a wrong state or fail with "Tensor is undefined"; the
// checksum covers them now, so it falls back to the previous checkpoint.
TEST(CheckpointDir, AnEditedHeaderOrMetadataByteMakesTheCheckpointUnusable) {
  const fs::path dir = fresh_dir("edited");
  checkpoint::CheckpointDir checkpoints(dir.string(), {.keep_last = 0});
  SmallRun run(1);
  checkpoint::TrainingState saved = run.state();
  for (std::int64_t step : {10, 20, 30}) {
    saved.values["step"] = std::to_string(step * 3);
    checkpoints.save(step, saved);
  }
  const std::vector<std::string> files = checkpoints.list();
  edit_bytes(files[2], "\"value.step\":\"90\"", "\"value.step\":\"9x\"");  // a loop value
  edit_bytes(files[1], "\"model.weight\"", "\"model.weighu\"");            // a tensor's name

  Warnings warnings;
  SmallRun other(2);
  checkpoint::TrainingState state = other.state();
  const auto path = checkpoints.resume(state);
  ASSERT_TRUE(path.has_value());
  EXPECT_EQ(*path, files[0]);
  EXPECT_EQ(state.values.at("step"), "30");
  ASSERT_EQ(warnings.messages.size(), 2u);
  EXPECT_NE(warnings.messages[0].find("do not match its checksum"), std::string::npos) << warnings.messages[0];
  EXPECT_NE(warnings.messages[1].find("do not match its checksum"), std::string::npos) << warnings.messages[1];
}

// Issue 31: reusing a folder without --resume lost the new run, because pruning kept the old
// run's higher step numbers and deleted every checkpoint the new run wrote.
TEST(CheckpointDir, AFolderHoldingAnotherRunIsRefusedUnlessResumedOrOverwritten) {
  const fs::path dir = fresh_dir("reused");
  SmallRun old_run(1), new_run(2);
  {
    checkpoint::CheckpointDir first(dir.string(), {.keep_last = 2});
    for (std::int64_t step : {400, 500}) first.save(step, old_run.state());
  }
  checkpoint::CheckpointDir second(dir.string(), {.keep_last = 2});
  EXPECT_ERROR(second.save(1, new_run.state()),
               "holds another run's checkpoints (2, the newest checkpoint-000000000500.safetensors): call resume()");
  EXPECT_EQ(second.list().size(), 2u);  // nothing was written or removed

  // Overwriting: the old run's files go once the new run's first checkpoint is in place, and
  // the new run's checkpoints are the ones pruning keeps.
  checkpoint::CheckpointDir replacing(dir.string(), {.keep_last = 2, .overwrite = true});
  for (std::int64_t step : {1, 2, 3}) replacing.save(step, new_run.state());
  std::vector<std::string> names;
  for (const std::string& f : replacing.list()) names.push_back(fs::path(f).filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"checkpoint-000000000002.safetensors",
                                             "checkpoint-000000000003.safetensors"}));

  // Resuming makes the folder's run this one's: its saves continue it.
  checkpoint::CheckpointDir resumed(dir.string(), {.keep_last = 2});
  checkpoint::TrainingState state = new_run.state();
  ASSERT_TRUE(resumed.resume(state).has_value());
  resumed.save(4, state);
  EXPECT_EQ(fs::path(resumed.list().back()).filename(), "checkpoint-000000000004.safetensors");
}

}  // namespace
