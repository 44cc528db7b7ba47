// tests/examples/test_program_flags.cpp — every program, every flag, a bad value: each run must
// end with exit status 2 and one line on stderr naming the flag, before any work, and never
// with a signal or a hang (issue 31: `--batch-size -1` aborted, `--threads 65536` crashed in
// libgomp, `--minutes 0` trained forever). The flags are read from each program's --help, so
// a flag added later is swept too; the bad values come from the check its help shows
// (an integer range, a number range, a list of choices, a file that must exist, an output
// path that must be writable).
// Read next: examples/support/flags.h, tests/examples/test_program_runs.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "program_runner.h"

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

/// The programs in examples/; a test below checks that none is missing.
const std::vector<std::string> kPrograms = {"train_mlp",      "train_cnn",     "amp_train", "fgsm",
                                            "pinned_pipeline", "train_charlm",  "train_ddp", "walkthrough",
                                            "creation_paths", "backward_graph", "failures"};

struct FlagHelp {
  std::string name;   // --epochs
  std::string type;   // INT, UINT, FLOAT, TEXT, BOOLEAN; "" for a switch
  std::string check;  // what --help shows after the type's colon: 1..1000000, (0,1000], a|b, FILE, ...
};

/// The flags `program --help` lists, with their types and checks.
std::vector<FlagHelp> flags_of(const std::string& program) {
  const ProgramRun help = run_example(program, {"--help"}, std::chrono::seconds(30));
  EXPECT_EQ(help.exit_code, 0) << program << " --help: " << help.describe();
  static const std::regex line(R"(^\s+(?:-h,)?(--[a-z0-9-]+)(?:\s+(INT|UINT|FLOAT|TEXT|BOOLEAN)(?::(\S*?))?(?:=\S*)?)?(?:\s|$))");
  std::vector<FlagHelp> flags;
  std::istringstream in(help.out);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (std::regex_search(text, m, line) && m[1] != "--help") flags.push_back({m[1], m[2], m[3]});
  }
  return flags;
}

/// Values the flag's check must refuse.
std::vector<std::string> bad_values(const FlagHelp& f, const fs::path& scratch) {
  const std::string& c = f.check;
  if (f.type == "BOOLEAN") return {"maybe"};
  if (c == "FILE" || c == "DIR" || c == "PATH") return {"/nonexistent-kiln-path/x"};
  if (c == "OUTPUT_FILE") return {"/nonexistent-kiln-path/out", scratch.string()};  // a folder is not a file
  if (c == "OUTPUT_DIR") return {(scratch / "a-file" / "sub").string()};           // a file in the way
  if (c.find("..") != std::string::npos) {                                         // lo..hi[|auto]
    const std::int64_t hi = std::stoll(c.substr(c.find("..") + 2));
    return {"-1", "3x", std::to_string(hi) + "0"};
  }
  if (!c.empty() && (c[0] == '(' || c[0] == '[')) return {"-1", "abc", "inf"};
  if (c.find('|') != std::string::npos) return {"bogus"};
  return {};  // free text (a prompt): nothing is wrong with it
}

class ProgramFlags : public ::testing::TestWithParam<std::string> {};

TEST_P(ProgramFlags, EveryBadValueIsOneLineNamingTheFlagAndExitStatus2) {
  if (examples_dir().empty()) GTEST_SKIP() << "the examples are not built (KILN_BUILD_EXAMPLES=OFF)";
  const std::string program = GetParam();
  const fs::path scratch = fs::temp_directory_path() / ("kiln_flags_" + program);
  fs::create_directories(scratch);
  std::ofstream(scratch / "a-file") << "not a folder";
  int tried = 0;
  for (const FlagHelp& flag : flags_of(program)) {
    for (const std::string& value : bad_values(flag, scratch)) {
      ++tried;
      const ProgramRun r = run_example(program, {flag.name, value}, std::chrono::seconds(60));
      const std::string what = program + " " + flag.name + " " + value + ": " + r.describe();
      EXPECT_EQ(r.signal, 0) << what;
      EXPECT_FALSE(r.timed_out) << what;
      EXPECT_EQ(r.exit_code, 2) << what;
      const std::vector<std::string> lines = r.err_lines();
      ASSERT_EQ(lines.size(), 1u) << what;
      EXPECT_EQ(lines[0].rfind(program + ": ", 0), 0u) << what;
      EXPECT_NE(lines[0].find(flag.name), std::string::npos) << what;
    }
  }
  // Every program takes --help, and an unknown flag or a stray argument is refused alike.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"--no-such-flag"}, {"--epochs"}}) {
    const ProgramRun r = run_example(program, args, std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 2) << program << " " << args[0] << ": " << r.describe();
    EXPECT_EQ(r.err_lines().size(), 1u) << program << " " << args[0] << ": " << r.describe();
  }
  if (program != "walkthrough" && program != "creation_paths" && program != "backward_graph" &&
      program != "failures") {
    EXPECT_GT(tried, 0) << program << "'s --help listed no flag with a check";
  }
  fs::remove_all(scratch);
}

INSTANTIATE_TEST_SUITE_P(Programs, ProgramFlags, ::testing::ValuesIn(kPrograms),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(ProgramFlags, EveryExampleProgramIsSwept) {
  std::set<std::string> listed(kPrograms.begin(), kPrograms.end());
  for (const auto& entry : fs::directory_iterator(fs::path(KILN_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() == ".cpp") {
      EXPECT_TRUE(listed.count(entry.path().stem().string())) << entry.path() << " is not in kPrograms";
    }
  }
}

TEST(ProgramFlags, TheFailureCatalogueRefusesAnUnknownCase) {
  if (examples_dir().empty()) GTEST_SKIP() << "the examples are not built";
  const ProgramRun r = run_example("failures", {"no-such-case"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  ASSERT_EQ(r.err_lines().size(), 1u) << r.describe();
  EXPECT_NE(r.err.find("no case named 'no-such-case' (try: failures list)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace kiln::testing
