// tests/distributed/programs/test_mismatched_ranks.cpp — train_ddp started as two ranks that
// disagree, through mpirun's MPMD form (`mpirun -np 1 train_ddp A : -np 1 train_ddp B`), as a
// user would start them (issue 31: the heap was corrupted, a segfault, or a hang for the whole
// timeout). --batch-size, --limit and --epochs are refused before training; a difference no
// check looks for (DDP's bucket size) is met by the collectives' fingerprints. Each case must
// end in a few seconds with a nonzero exit and, on each rank's stderr, the one line that names
// the disagreement; never a signal. ctest runs this binary outside mpirun: each case starts
// its own, on a small folder of Fashion-MNIST-shaped files.
// Read next: examples/train_ddp.cpp (check_same_across_ranks), distributed/fingerprint.h.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/fashion_files.h"

namespace {

namespace fs = std::filesystem;

struct Finished {
  int exit_status = -1;  // -1 when mpirun itself ended on a signal
  std::string output;    // stdout and stderr together, as mpirun --tag-output prints them
  double seconds = 0;
};

Finished run(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  Finished f;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return f;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) f.output.append(buffer, n);
  const int status = pclose(pipe);
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) f.exit_status = WEXITSTATUS(status);
  return f;
}

/// What rank `rank` wrote on stderr, line by line (--tag-output puts "[1,rank]<stderr>:" first).
std::vector<std::string> stderr_of(const std::string& output, int rank) {
  const std::string tag = "[1," + std::to_string(rank) + "]<stderr>:";
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(tag, 0) == 0) lines.push_back(line.substr(tag.size()));
  }
  return lines;
}

/// A folder of 256 training and 64 test images, written once per process (ctest -j runs the
/// cases as separate processes, so each has its own) and removed at exit.
const fs::path& fashion_folder() {
  struct Folder {
    fs::path path = fs::current_path() / ("mismatched_ranks_fashion." + std::to_string(getpid()));
    Folder() { kiln::testing::write_fashion_files(path, 256, 64); }
    ~Folder() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

constexpr int kTimeoutSeconds = 30;

/// Starts rank 0 with `flags_0` and rank 1 with `flags_1`, both on the same data, and checks
/// that each rank printed one line on stderr, matching `expected` (a regular expression), that
/// the job failed without a signal, and that it took well under the ranks' --timeout (so no
/// collective waited it out).
void expect_refused(const std::string& flags_0, const std::string& flags_1, const std::string& expected) {
  // Open MPI refuses to run as root (CI's case) unless told twice; more ranks than cores is fine.
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  const std::string program = std::string(KILN_TRAIN_DDP) + " --data " + fashion_folder().string() +
                              " --threads 1 --timeout " + std::to_string(kTimeoutSeconds) + " ";
  const std::string command = std::string(KILN_MPIEXEC) + " --oversubscribe --tag-output -np 1 " + program +
                              flags_0 + " : -np 1 " + program + flags_1;
  const Finished f = run(command);
  SCOPED_TRACE(command + "\n" + f.output);
  EXPECT_NE(f.exit_status, 0);
  EXPECT_NE(f.exit_status, -1) << "mpirun ended on a signal";
  EXPECT_EQ(f.output.find("signal"), std::string::npos) << "a rank ended on a signal";
  EXPECT_LT(f.seconds, kTimeoutSeconds / 2.0) << "the ranks waited for the timeout instead of refusing at once";
  for (int rank : {0, 1}) {
    const std::vector<std::string> lines = stderr_of(f.output, rank);
    ASSERT_EQ(lines.size(), 1u) << "rank " << rank << " should print one line on stderr";
    EXPECT_TRUE(std::regex_match(lines[0], std::regex(expected))) << "rank " << rank << ": " << lines[0];
  }
}

TEST(MismatchedRanks, DifferentBatchSizesAreRefusedOnBothRanks) {
  expect_refused("--epochs 1 --batch-size 32", "--epochs 1 --batch-size 64",
                 "train_ddp: ranks disagree on --batch-size: rank 0 has 32, rank 1 has 64");
}

TEST(MismatchedRanks, DifferentLimitsAreRefusedOnBothRanks) {
  expect_refused("--epochs 1 --limit 256", "--epochs 1 --limit 128",
                 "train_ddp: ranks disagree on training samples \\(--limit\\): rank 0 has 256, rank 1 has 128");
}

TEST(MismatchedRanks, DifferentEpochsAreRefusedOnBothRanks) {
  expect_refused("--epochs 1", "--epochs 2", "train_ddp: ranks disagree on --epochs: rank 0 has 1, rank 1 has 2");
}

// Rank 1's first gradient bucket holds 133,898 elements, rank 0's all 535,818: at the branch's
// start rank 1 died of "malloc(): corrupted top size" and rank 0 waited out its timeout.
TEST(MismatchedRanks, DifferentBucketSizesMeetTheFingerprintsOnBothRanks) {
  expect_refused("--epochs 1", "--epochs 1 --first-bucket-cap-mb 0.5",
                 "train_ddp: all_reduce .* failed: all_reduce #[0-9]+ does not match across ranks: rank 1 called "
                 "all_reduce of 133,898 Float32 elements, rank 0 all_reduce of 535,818 Float32 elements \\(every "
                 "rank must call the same collectives in the same order with the same sizes\\)");
}

}  // namespace
