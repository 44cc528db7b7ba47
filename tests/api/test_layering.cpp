// tests/api/test_layering.cpp — the layer table is the build's (kiln_add_layer in CMakeLists.txt,
// handed over as KILN_LAYER_TABLE), and this suite holds the code and the docs to it: every
// #include in a layer's folder names that layer or one it may use, the table has no cycle, and
// Note [Layering] and docs/internals.md draw the table the build has. The link is checked by the
// build itself (each layer's check program).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = KILN_SOURCE_DIR;

using LayerTable = std::map<std::string, std::set<std::string>>;  // layer -> layers it uses

std::set<std::string> words(const std::string& text, char separator) {
  std::set<std::string> out;
  std::stringstream in(text);
  for (std::string word; std::getline(in, word, separator);) {
    if (!word.empty()) out.insert(word);
  }
  return out;
}

/// "core=|autograd=core|nn=autograd,core|...", as CMakeLists.txt writes it.
LayerTable build_table() {
  LayerTable table;
  for (const std::string& entry : words(KILN_LAYER_TABLE, '|')) {
    const std::size_t equals = entry.find('=');
    table[entry.substr(0, equals)] = words(entry.substr(equals + 1), ',');
  }
  return table;
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// The table drawn under a "layer        uses" heading in `file` (each row's prefix, such as
/// "//   ", stripped; a parenthesised remark ends the row), up to the first row that is blank.
LayerTable drawn_table(const fs::path& file, const std::string& prefix) {
  LayerTable table;
  const std::vector<std::string> lines = lines_of(file);
  const std::regex heading("^" + prefix + R"(layer\s+uses\s*$)");
  const std::regex row("^" + prefix + R"((\w+)\s*([a-z ]*?)\s*(\(.*\))?\s*$)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (!std::regex_match(lines[i], heading)) continue;
    for (std::size_t j = i + 1; j < lines.size(); ++j) {
      std::smatch m;
      if (!std::regex_match(lines[j], m, row)) break;
      table[m[1]] = words(m[2], ' ');
    }
    break;
  }
  return table;
}

std::string describe(const LayerTable& table) {
  std::string out;
  for (const auto& [layer, uses] : table) {
    out += "  " + layer + ":";
    for (const std::string& below : uses) out += " " + below;
    out += "\n";
  }
  return out;
}

TEST(Layering, TheBuildsTableHasEveryLayerAndNoCycle) {
  const LayerTable table = build_table();
  ASSERT_GE(table.size(), 10u) << describe(table);
  ASSERT_TRUE(table.count("core") && table.at("core").empty()) << "core uses nothing\n" << describe(table);
  for (const auto& [layer, uses] : table) {
    for (const std::string& below : uses) {
      ASSERT_TRUE(table.count(below)) << layer << " uses " << below << ", which is no layer";
      EXPECT_FALSE(table.at(below).count(layer)) << layer << " and " << below << " use each other";
      // Closed under "uses": a layer's list names everything its objects are linked with.
      for (const std::string& further : table.at(below)) {
        EXPECT_TRUE(uses.count(further)) << layer << " uses " << below << ", which uses " << further
                                         << ", so " << layer << "'s list must name " << further;
      }
    }
    EXPECT_TRUE(fs::is_directory(kRoot / layer)) << "layer " << layer << " has no folder";
  }
}

TEST(Layering, EveryIncludeNamesItsOwnLayerOrOneItUses) {
  const LayerTable table = build_table();
  const std::regex include(R"#(^\s*#\s*include\s+"([a-z_]+)/)#");
  std::vector<std::string> climbs;
  std::size_t includes_checked = 0;
  for (const auto& [layer, uses] : table) {
    for (const auto& entry : fs::recursive_directory_iterator(kRoot / layer)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
      const std::vector<std::string> lines = lines_of(entry.path());
      for (std::size_t i = 0; i < lines.size(); ++i) {
        std::smatch m;
        if (!std::regex_search(lines[i], m, include) || !table.count(m[1])) continue;
        ++includes_checked;
        if (m[1] != layer && !uses.count(m[1])) {
          climbs.push_back(fs::relative(entry.path(), kRoot).string() + ":" + std::to_string(i + 1) + ": " +
                           layer + "/ includes " + lines[i].substr(lines[i].find('"')));
        }
      }
    }
  }
  EXPECT_GT(includes_checked, 1000u);
  std::string all;
  for (const std::string& c : climbs) all += "  " + c + "\n";
  EXPECT_TRUE(climbs.empty()) << climbs.size() << " includes climb a layer or cross to one not used "
                              << "(Note [Layering] in core/tensor.h):\n" << all;
}

TEST(Layering, TheNoteAndTheGuideDrawTheBuildsTable) {
  const LayerTable table = build_table();
  EXPECT_EQ(describe(drawn_table(kRoot / "core" / "tensor.h", "//   ")), describe(table))
      << "Note [Layering] in core/tensor.h";
  EXPECT_EQ(describe(drawn_table(kRoot / "docs" / "internals.md", "")), describe(table))
      << "docs/internals.md, section 0";
}

}  // namespace
