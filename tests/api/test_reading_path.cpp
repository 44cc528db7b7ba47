// tests/api/test_reading_path.cpp — the reading path a learner follows through the source is
// checked like code: every "Read next:" names files that exist (from the repository's root,
// or beside the file that names them), and every Note [...] that a comment or a document
// points at is defined exactly once, in the one Note style:
//
//   // Note [Title]
//   // ~~~~~~~~~~~~
//   // Why, in prose.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = KILN_SOURCE_DIR;

/// The library's, the programs' and the tests' sources, and the documents.
std::vector<fs::path> sources() {
  std::vector<fs::path> files = {kRoot / "kiln.h", kRoot / "README.md"};
  for (const char* dir : {"core", "autograd", "nn", "optim", "amp", "data", "checkpoint", "memory", "distributed",
                          "compile", "profiler", "onnx", "examples", "tests", "docs", "tools"}) {
    if (!fs::exists(kRoot / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / dir)) {
      const std::string ext = entry.path().extension().string();
      // This file shows the style and builds messages from it: it defines and refers to nothing.
      if (entry.path().filename() == "test_reading_path.cpp") continue;
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh" || ext == ".md")) {
        files.push_back(entry.path());
      }
    }
  }
  return files;
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string where(const fs::path& file, std::size_t line) {
  std::string at = fs::relative(file, kRoot).string();
  at += ':';
  at += std::to_string(line + 1);
  return at;
}

TEST(ReadingPath, EveryReadNextNamesFilesThatExist) {
  const std::regex read_next(R"(Read next:(.*))");
  const std::regex source_name(R"(([\w./-]+\.(h|cpp|cu|cuh|md))\b)");
  int links = 0;
  for (const fs::path& file : sources()) {
    const std::vector<std::string> lines = lines_of(file);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_search(lines[i], m, read_next)) continue;
      // The list may go on over the next comment lines, up to its full stop.
      std::string text = m[1];
      for (std::size_t j = i + 1; j < lines.size() && text.find_last_not_of(' ') != std::string::npos &&
                                  text[text.find_last_not_of(' ')] != '.' && lines[j].find("//") != std::string::npos;
           ++j) {
        text += ' ';
        text.append(lines[j], lines[j].find("//") + 2);
      }
      for (auto it = std::sregex_iterator(text.begin(), text.end(), source_name); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        ++links;
        EXPECT_TRUE(fs::exists(kRoot / name) || fs::exists(file.parent_path() / name))
            << where(file, i) << " says to read " << name << ", which does not exist";
      }
    }
  }
  EXPECT_GT(links, 200) << "the scan found too few links to be reading the sources";
}

TEST(ReadingPath, EveryNoteReferencedIsDefinedOnceInOneStyle) {
  const std::regex note(R"(Note \[([^\]]+)\])");
  const std::regex inline_definition(R"(^\s*// Note \[[^\]]+\]:)");
  std::map<std::string, std::vector<std::string>> definitions;
  std::vector<std::pair<std::string, std::string>> references;  // (title, where)
  for (const fs::path& file : sources()) {
    const std::vector<std::string> lines = lines_of(file);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      EXPECT_FALSE(std::regex_search(lines[i], inline_definition))
          << where(file, i) << ": a Note is defined as a title line and a line of ~, not 'Note [...]: text'";
      for (auto it = std::sregex_iterator(lines[i].begin(), lines[i].end(), note); it != std::sregex_iterator(); ++it) {
        const std::string title = (*it)[1];
        const bool is_header = lines[i].find_first_not_of(" /") == lines[i].find("Note [") &&
                               lines[i].find(']') + 1 == lines[i].size() && i + 1 < lines.size() &&
                               lines[i + 1].find("// ~~~") != std::string::npos;
        if (is_header) {
          definitions[title].push_back(where(file, i));
        } else {
          references.emplace_back(title, where(file, i));
        }
      }
    }
  }
  EXPECT_GT(definitions.size(), 40u);
  for (const auto& [title, at] : definitions) {
    EXPECT_EQ(at.size(), 1u) << "Note [" << title << "] is defined " << at.size() << " times, first at " << at[0];
  }
  for (const auto& [title, at] : references) {
    if (title == "...") continue;  // docs/internals.md explains the notation itself
    EXPECT_TRUE(definitions.contains(title)) << at << " refers to Note [" << title << "], which is defined nowhere";
  }
}

}  // namespace
