// tests/examples/program_runner.h — runs one of the built example programs as a user would,
// in a child process, and reports how it ended: exit status or signal, and what it wrote to
// stdout and stderr. A program that outlives its time limit is killed, and the result says so,
// so a hang fails a test instead of stalling the suite.
//   const ProgramRun r = run_example("train_mlp", {"--epochs", "-1"});
//   EXPECT_EQ(r.exit_code, 2);
// Read next: tests/examples/test_program_flags.cpp.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kiln::testing {

struct ProgramRun {
  int exit_code = -1;  // when it exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  std::string out, err;

  /// stderr's lines (the trailing newline does not start another).
  std::vector<std::string> err_lines() const {
    std::vector<std::string> lines;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  /// "exit 2", "signal 11", "timed out", with stderr, for failure messages.
  std::string describe() const {
    std::string how = timed_out ? "timed out" : signal ? "signal " + std::to_string(signal)
                                                       : "exit " + std::to_string(exit_code);
    return how + "; stderr:\n" + err + "stdout (end):\n" + out.substr(out.size() > 600 ? out.size() - 600 : 0);
  }
};

/// Where the example programs were built (tests/CMakeLists.txt passes it in).
inline std::filesystem::path examples_dir() {
#ifdef KILN_EXAMPLES_DIR
  return KILN_EXAMPLES_DIR;
#else
  return {};
#endif
}

/// Runs `program` (a path) with `args` and `extra_env` ("NAME=value"), killing it after
/// `limit`.
inline ProgramRun run_program_at(const std::filesystem::path& program, const std::vector<std::string>& args,
                                 std::chrono::seconds limit = std::chrono::seconds(120),
                                 const std::vector<std::string>& extra_env = {}) {
  namespace fs = std::filesystem;
  static int counter = 0;
  const fs::path base = fs::temp_directory_path() /
                        ("kiln_program_run_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out", err_path = base.string() + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> argv_strings{program.string()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  ProgramRun run;
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    run.err = "could not start " + program.string() + ": " + std::strerror(spawned) + "\n";
    return run;
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      run.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!run.timed_out) {
    if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  }
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string{std::istreambuf_iterator<char>(in), {}};
  };
  run.out = slurp(out_path);
  run.err = slurp(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return run;
}

/// Runs the example program `name` (train_mlp, ...).
inline ProgramRun run_example(const std::string& name, const std::vector<std::string>& args,
                              std::chrono::seconds limit = std::chrono::seconds(120),
                              const std::vector<std::string>& extra_env = {}) {
  return run_program_at(examples_dir() / name, args, limit, extra_env);
}

}  // namespace kiln::testing
