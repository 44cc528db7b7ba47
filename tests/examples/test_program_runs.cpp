// tests/examples/test_program_runs.cpp — the programs, run as a user runs them, on the
// mistakes that used to lose work silently (issue 31): a reused checkpoint folder, flags a
// resumed run cannot honour, a log that lost its header or repeated an epoch, a --generate
// without its checkpoint, a binary file given as text. Each run trains on a small folder of
// Fashion-MNIST-shaped files (tests/support/fashion_files.h) for a second or less.
// Read next: tests/examples/test_resume.cpp (the bit-exact resumption of killed runs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/call_stack.h"
#include "kiln.h"
#include "program_runner.h"
#include "support/fashion_files.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

class ProgramRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (examples_dir().empty()) GTEST_SKIP() << "the examples are not built (KILN_BUILD_EXAMPLES=OFF)";
    root_ = fs::temp_directory_path() /
            ("kiln_program_runs_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    write_fashion_files(root_ / "data", 128, 64);
  }
  void TearDown() override {
    if (!root_.empty()) fs::remove_all(root_);
  }
  /// train_mlp on the small folder, 2 epochs of 4 steps, plus `args`.
  ProgramRun train_mlp(std::vector<std::string> args) const {
    std::vector<std::string> all{"--data", (root_ / "data").string(), "--epochs", "2", "--batch-size", "32",
                                 "--threads", "1"};
    all.insert(all.end(), args.begin(), args.end());
    return run_example("train_mlp", all);
  }
  static std::vector<std::string> lines_of(const fs::path& file) {
    std::ifstream in(file);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  static std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path root_;
};

TEST_F(ProgramRuns, AReusedCheckpointFolderIsRefusedWithoutResumeOrOverwrite) {
  const std::string dir = (root_ / "run").string();
  ASSERT_EQ(train_mlp({"--checkpoint-dir", dir}).exit_code, 0);
  const std::vector<std::string> first = names_in(dir);
  ASSERT_EQ(first.size(), 2u);  // one checkpoint per epoch

  const ProgramRun again = train_mlp({"--checkpoint-dir", dir, "--seed", "7"});
  EXPECT_EQ(again.exit_code, 2) << again.describe();
  ASSERT_EQ(again.err_lines().size(), 1u) << again.describe();
  EXPECT_NE(again.err.find("--checkpoint-dir '" + dir + "' holds another run's checkpoints (2, the newest "
                           "checkpoint-000000000008.safetensors): pass --resume to continue that run, or --overwrite"),
            std::string::npos)
      << again.err;
  EXPECT_EQ(again.out.find("epoch 1"), std::string::npos) << "it trained before refusing";
  EXPECT_EQ(names_in(dir), first);

  // --overwrite: the new run's checkpoints replace the old run's.
  const ProgramRun replaced = train_mlp({"--checkpoint-dir", dir, "--seed", "7", "--epochs", "1", "--overwrite"});
  EXPECT_EQ(replaced.exit_code, 0) << replaced.describe();
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"checkpoint-000000000004.safetensors"});
}

TEST_F(ProgramRuns, AResumedRunRefusesFlagsItCannotHonour) {
  const std::string dir = (root_ / "run").string();
  ASSERT_EQ(train_mlp({"--checkpoint-dir", dir, "--epochs", "1"}).exit_code, 0);
  for (const std::vector<std::string>& changed :
       std::vector<std::vector<std::string>>{{"--lr", "0.1"}, {"--optimizer", "adamw"}, {"--batch-size", "16"}}) {
    std::vector<std::string> args{"--checkpoint-dir", dir, "--epochs", "1", "--resume"};
    args.insert(args.end(), changed.begin(), changed.end());
    const ProgramRun r = train_mlp(args);
    EXPECT_EQ(r.exit_code, 2) << changed[0] << ": " << r.describe();
    ASSERT_EQ(r.err_lines().size(), 1u) << r.describe();
    EXPECT_NE(r.err.find(changed[0] + " " + changed[1] + " differs from the run being resumed"), std::string::npos)
        << r.err;
  }
  // The same flags resume (nothing is left to train: it evaluates and ends).
  EXPECT_EQ(train_mlp({"--checkpoint-dir", dir, "--epochs", "1", "--resume"}).exit_code, 0);
}

TEST_F(ProgramRuns, AResumedLogKeepsOneHeaderAndOneLinePerEpoch) {
  const std::string dir = (root_ / "run").string(), log = (root_ / "log.csv").string();
  ASSERT_EQ(train_mlp({"--checkpoint-dir", dir, "--keep-checkpoints", "0", "--log", log}).exit_code, 0);
  ASSERT_EQ(lines_of(log).size(), 3u);
  // Killed after epoch 2's log line but before its checkpoint: the resumed run runs epoch 2
  // again, and its line must replace the first one, not follow it.
  fs::remove(fs::path(dir) / "checkpoint-000000000008.safetensors");
  const ProgramRun resumed = train_mlp({"--checkpoint-dir", dir, "--log", log, "--resume"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  std::vector<std::string> lines = lines_of(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "epoch,train_loss,test_loss,test_accuracy,seconds,samples_per_second");
  EXPECT_EQ(lines[1].substr(0, 2), "1,");
  EXPECT_EQ(lines[2].substr(0, 2), "2,");

  // Resumed into a log that is gone: the header comes back (the lost lines cannot).
  fs::remove(fs::path(dir) / "checkpoint-000000000008.safetensors");
  fs::remove(log);
  ASSERT_EQ(train_mlp({"--checkpoint-dir", dir, "--log", log, "--resume"}).exit_code, 0);
  lines = lines_of(log);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].substr(0, 6), "epoch,");
  EXPECT_EQ(lines[1].substr(0, 2), "2,");
}

TEST_F(ProgramRuns, GenerateNeedsAnExistingCheckpoint) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--generate", "50", "--checkpoint", (root_ / "typo.safetensors").string()}, {"--generate", "50"}}) {
    const ProgramRun r = run_example("train_charlm", args, std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    ASSERT_EQ(r.err_lines().size(), 1u) << r.describe();
    EXPECT_NE(r.err.find("--generate"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("step"), std::string::npos) << "it trained instead";
  }
}

TEST_F(ProgramRuns, ABinaryFileIsNotTrainedOnAsText) {
  const ProgramRun r = run_example("train_charlm", {"--text", (examples_dir() / "train_charlm").string(), "--steps", "1"},
                                   std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  ASSERT_EQ(r.err_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.err.find("is not a text file"), std::string::npos) << r.err;
}

/// The ProfilerStep#N spans in the Trace Event JSON at `trace` (-1 when it cannot be read).
int profiled_steps(const fs::path& trace) {
  std::ifstream in(trace);
  if (!in.good()) return -1;
  const nlohmann::json parsed = nlohmann::json::parse(in);  // alive through the loop below
  int steps = 0;
  for (const nlohmann::json& e : parsed.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("name").get<std::string>().rfind("ProfilerStep#", 0) == 0) ++steps;
  }
  return steps;
}

// --profile: steps 3-5 (after 2 warm-up steps) are profiled; the table is printed and the
// trace written where asked, as Trace Event JSON with the three steps in it.
TEST_F(ProgramRuns, ProfileWritesATraceAndPrintsTheTable) {
  const fs::path dir = root_ / "profile";
  const ProgramRun r = train_mlp({"--profile", dir.string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* text : {"Self CPU %", "# of Calls", "optimizer.step", "Self CPU time total: ", "trace.json"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  EXPECT_EQ(profiled_steps(dir / "trace.json"), 3);
  EXPECT_TRUE(fs::exists(dir / "step.html"));
}

// --profile-with-stack: the table groups ops by where they were called (PyTorch's Source
// Location), and DIR/stacks.txt holds one collapsed stack per op, outermost first, the
// program's own frames (its main, its loop) kept and Kiln's left out.
TEST_F(ProgramRuns, ProfileWithStackWritesTheOpsCallStacks) {
  // Without --profile there is nothing to record stacks into: refused, before any work.
  for (const char* program : {"train_mlp", "train_charlm"}) {
    const ProgramRun alone = run_example(program, {"--profile-with-stack"});
    EXPECT_EQ(alone.exit_code, 2) << alone.describe();
    ASSERT_EQ(alone.err_lines().size(), 1u) << alone.describe();
    EXPECT_NE(alone.err.find("--profile-with-stack requires --profile"), std::string::npos) << alone.err;
  }
  const fs::path dir = root_ / "profile_stacks";
  const ProgramRun r = train_mlp({"--profile", dir.string(), "--profile-with-stack"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* text : {"Source Location", "stacks.txt"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  std::ifstream in(dir / "stacks.txt");
  ASSERT_TRUE(in) << "no stacks.txt";
  const std::regex collapsed(R"(^.+ [0-9]+$)");  // frame;frame;...;frame microseconds
  int lines = 0, through_main = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    EXPECT_TRUE(std::regex_match(line, collapsed)) << line;
    std::istringstream frames(line.substr(0, line.rfind(' ')));
    for (std::string frame; std::getline(frames, frame, ';');) EXPECT_FALSE(is_kiln_frame(frame)) << line;
    if (line.starts_with("main;") || line.find(";main;") != std::string::npos) ++through_main;
  }
  EXPECT_GT(lines, 5);
  EXPECT_GT(through_main, 0) << "no stack goes through the program's main";
}

// train_charlm's loop is its own: the same three steps, with the Transformer's ops in the table.
TEST_F(ProgramRuns, TrainCharlmProfilesItsSteps) {
  const fs::path text = root_ / "text.txt", dir = root_ / "charlm_profile";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const ProgramRun r = run_example("train_charlm", {"--text", text.string(), "--steps", "6", "--eval-every", "6",
                                                    "--context", "16", "--width", "16", "--layers", "1", "--heads",
                                                    "2", "--profile", dir.string()},
                                   std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const char* text_in_table : {"Self CPU %", "aten::", "trace.json"}) {
    EXPECT_NE(r.out.find(text_in_table), std::string::npos) << text_in_table << "\n" << r.out;
  }
  // The optimizer's region is in the trace; the table shows only its 20 costliest rows, and
  // with so small a model optimizer.step ranks near that cut from run to run.
  std::ifstream trace(dir / "trace.json");
  const std::string events((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
  EXPECT_NE(events.find("\"optimizer.step\""), std::string::npos);
  EXPECT_EQ(profiled_steps(dir / "trace.json"), 3);
  EXPECT_TRUE(fs::exists(dir / "step.html"));
}

TEST_F(ProgramRuns, TrainCharlmChecksItsActivationsForTheTransformerOnly) {
  const fs::path text = root_ / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 200; ++i) out << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const std::vector<std::string> small{"--text", text.string(), "--steps", "3", "--eval-every", "3", "--context",
                                       "16", "--width", "16", "--layers", "2", "--heads", "2"};
  std::vector<std::string> args = small;
  args.push_back("--checkpoint-activations");
  const ProgramRun r = run_example("train_charlm", args, std::chrono::seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("step"), std::string::npos) << r.out;

  args.insert(args.end(), {"--model", "lstm"});
  const ProgramRun lstm = run_example("train_charlm", args, std::chrono::seconds(30));
  EXPECT_EQ(lstm.exit_code, 2) << lstm.describe();
  EXPECT_NE(lstm.err.find("--checkpoint-activations checkpoints the Transformer's layers"), std::string::npos)
      << lstm.err;
}

TEST_F(ProgramRuns, TrainCharlmGivesEachModelItsOwnWindowUnlessOneIsGiven) {
  const fs::path text = root_ / "text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 400; ++i) out << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  const auto context_of = [&](const std::vector<std::string>& extra) {
    const std::string checkpoint = (root_ / "charlm.safetensors").string();
    std::vector<std::string> args{"--text", text.string(), "--steps", "1", "--eval-every", "1", "--width", "16",
                                  "--layers", "1", "--heads", "2", "--hidden", "16", "--checkpoint", checkpoint};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProgramRun r = run_example("train_charlm", args, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return load_safetensors_metadata(checkpoint).at("context");
  };
  EXPECT_EQ(context_of({}), "128");
  EXPECT_EQ(context_of({"--model", "lstm"}), "64");
  EXPECT_EQ(context_of({"--context", "32"}), "32");
  EXPECT_EQ(context_of({"--model", "lstm", "--context", "32"}), "32");
}

TEST_F(ProgramRuns, TrainDdpWritesItsLogAndProfile) {
  if (!distributed::mpi_is_available()) GTEST_SKIP() << "Kiln is built without MPI";
  const std::string log = (root_ / "ddp.csv").string();
  const fs::path profile = root_ / "ddp_profile";
  const ProgramRun r = run_example("train_ddp", {"--data", (root_ / "data").string(), "--epochs", "2", "--batch-size",
                                                 "32", "--threads", "1", "--log", log, "--profile", profile.string()},
                                   std::chrono::seconds(120),
                                   {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].substr(0, 6), "epoch,");
  EXPECT_EQ(lines[2].substr(0, 2), "2,");
  // --profile: this rank's trace (one rank here), its three steps across the epochs' boundary.
  EXPECT_NE(r.out.find("Self CPU %"), std::string::npos) << r.out;
  EXPECT_EQ(profiled_steps(profile / "trace.rank0.json"), 3);
  EXPECT_TRUE(fs::exists(profile / "step.rank0.html"));
}

}  // namespace
}  // namespace kiln::testing
