// examples/failures.cpp — the failure-case catalogue: reproduce a classic tensor-creation
// failure, read the exact error, understand the cause, run the fix.
//   build/examples/failures list
//   build/examples/failures float64-input
//   build/examples/failures all        # exits non-zero if a case stops reproducing or its fix breaks
// docs/failure-cases.md explains each case at length.
// Read next: examples/support/failure_cases.h.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "support/failure_cases.h"
#include "support/flags.h"

namespace {

using kiln::examples::FailureCase;

enum class Outcome { Passed, Failed, Skipped };

Outcome run_case(const FailureCase& c) {
  std::cout << "== " << c.name << ": " << c.title << " ==\n\n";
  if (c.gpu_only && !kiln::cuda::is_available()) {
    std::cout << "Needs a GPU, and none is available here: skipped.\n\nWhy it fails:\n" << c.cause << "\n\n";
    return Outcome::Skipped;
  }
  if (c.predict) {
    std::cout << "-- predict (nothing runs: kiln::memory::plan on the meta device) --\n";
    const bool predicted = c.predict(std::cout);
    std::cout << (predicted ? "predicted: this will fail\n\n" : "!! the plan did not predict the failure\n\n");
  }
  std::cout << "-- reproduce --\n";
  const std::optional<std::string> seen = c.reproduce(std::cout);
  const bool reproduced = seen && seen->find(c.expected) != std::string::npos;
  std::cout << (seen ? *seen : std::string("(no failure happened)")) << "\n\n";
  std::cout << "-- why --\n" << c.cause << "\n\n-- fix --\n";
  bool fixed = false;
  try {
    fixed = c.fix(std::cout);
  } catch (const kiln::Error& e) {
    std::cout << "the fix failed: " << e.message() << "\n";
  }
  std::cout << "\n";
  if (!reproduced) std::cout << "!! " << c.name << " did not reproduce (expected: \"" << c.expected << "\")\n\n";
  if (!fixed) std::cout << "!! " << c.name << ": the fix did not work\n\n";
  return reproduced && fixed ? Outcome::Passed : Outcome::Failed;
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::examples::run_program("failures", [&] {
    const std::vector<FailureCase> cases = kiln::examples::failure_cases();
    std::string what = "list";
    bool unsafe = false;
    kiln::examples::Flags flags("failures", "the failure-case catalogue: failures <case> | all | list");
    flags.add("case", what, "a case's name, all, or list")
        ->check(CLI::Validator(
            [&cases](std::string& value) -> std::string {
              if (value == "all" || value == "list") return {};
              for (const FailureCase& c : cases) {
                if (c.name == value) return {};
              }
              return "no case named '" + value + "' (try: failures list)";
            },
            "CASE"));
    flags.add_switch("--unsafe", unsafe, "with dangling-blob: really read the freed memory (undefined behaviour)");
    flags.parse(argc, argv);
    if (unsafe) setenv("KILN_FAILURES_UNSAFE", "1", 1);
    if (what == "list") {
      std::printf("usage: failures <case> | all | list\n\n");
      for (std::size_t i = 0; i < cases.size(); ++i) {
        std::printf("%2zu. %-24s %s%s\n", i + 1, cases[i].name.c_str(), cases[i].title.c_str(),
                    cases[i].gpu_only ? " (GPU)" : "");
      }
      return 0;
    }
    int failed = 0, skipped = 0, passed = 0;
    for (const FailureCase& c : cases) {
      if (what != "all" && what != c.name) continue;
      switch (run_case(c)) {
        case Outcome::Passed: ++passed; break;
        case Outcome::Failed: ++failed; break;
        case Outcome::Skipped: ++skipped; break;
      }
    }
    if (what == "all") std::printf("%d reproduced and fixed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed == 0 ? 0 : 1;
  });
}
