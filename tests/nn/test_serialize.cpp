// tests/nn/test_serialize.cpp — state_dict round trips through safetensors, PyTorch's
// load_state_dict errors, the exact bytes of a small file, atomic saves, and clear errors for
// corrupt files.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/test_util.h"

using namespace kiln;
using kiln::testing::values;

namespace {
std::string temp(const std::string& name) { return ::testing::TempDir() + "kiln_st_" + name + ".safetensors"; }
std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_file(const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }
std::string with_header(const std::string& json, const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}
}  // namespace

TEST(Safetensors, StateDictRoundTrip) {
  manual_seed(1);
  nn::Sequential model{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4)};
  model(randn({5, 3}));  // moves the running stats
  const std::string path = temp("roundtrip");
  save(path, model.state_dict(), {{"format", "pt"}});
  nn::Sequential fresh{std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::BatchNorm1d>(4)};
  Tensor weight_before = fresh.parameters()[0];
  fresh.load_state_dict(load(path));
  for (const auto& [name, t] : model.state_dict()) {
    EXPECT_EQ(values(fresh.state_dict().at(name)), values(t)) << name;
  }
  EXPECT_TRUE(fresh.parameters()[0].is_same(weight_before));  // values copied in, identity kept
  EXPECT_EQ(load(path).at("1.num_batches_tracked").dtype(), kInt64);
  EXPECT_EQ(load_safetensors_metadata(path).at("format"), "pt");
  std::vector<std::string> order;
  for (const auto& [name, t] : load(path)) order.push_back(name);
  EXPECT_EQ(order.front(), "0.weight");  // file order is state_dict order
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp." + std::to_string(getpid())));
  std::remove(path.c_str());
}

TEST(Safetensors, WritesTheDocumentedLayout) {
  const std::string path = temp("layout");
  save(path, {{"w", tensor({1.0f, 2.0f})}});
  const std::string bytes = read_file(path);
  const std::string json = R"({"w":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  // 8-byte little-endian length, the JSON padded with spaces so data starts 8-byte aligned.
  const std::size_t padded = (json.size() + 8 + 7) / 8 * 8 - 8;
  ASSERT_EQ(bytes.size(), 8 + padded + 8);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), padded);
  EXPECT_EQ(bytes.substr(8, json.size()), json);
  EXPECT_EQ(bytes.substr(8 + padded), std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));
  std::remove(path.c_str());
}

TEST(Safetensors, LoadStateDictErrorsSpeakPyTorch) {
  nn::Linear l(2, 3);
  StateDict bad{{"weight", zeros({2, 2})}, {"extra", zeros({1})}};
  const std::string msg = kiln::testing::error_of([&] { l.load_state_dict(bad); });
  EXPECT_NE(msg.find("Error(s) in loading state_dict for Linear:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Missing key(s) in state_dict: \"bias\"."), std::string::npos) << msg;
  EXPECT_NE(msg.find("Unexpected key(s) in state_dict: \"extra\"."), std::string::npos) << msg;
  EXPECT_NE(msg.find("size mismatch for weight: copying a param with shape [2, 2] from checkpoint, the shape in current model is [3, 2]."),
            std::string::npos) << msg;
  StateDict partial{{"weight", ones({3, 2})}};
  l.load_state_dict(partial, /*strict=*/false);
  EXPECT_EQ(values(l.weight), std::vector<double>(6, 1.0));
}

TEST(Safetensors, FailedSaveLeavesTheOldFileIntact) {
  const std::string path = temp("atomic");
  save(path, {{"a", ones({2})}});
  const std::string before = read_file(path);
  EXPECT_ERROR(save(path, {{"a", ones({3})}, {"b", Tensor()}}), "save: entry 'b' is an undefined tensor");
  EXPECT_EQ(read_file(path), before);
  EXPECT_ERROR(save("/nonexistent/dir/x.safetensors", {{"a", ones({1})}}), "save: cannot create");
  std::remove(path.c_str());
}

TEST(Safetensors, CorruptFilesGiveClearErrors) {
  const std::string path = temp("corrupt");
  const std::string ok_json = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_file(path, "abc");
  EXPECT_ERROR(load(path), "safetensors: file is too short (3 bytes) to hold the header length");
  write_file(path, with_header(ok_json, std::string(4, '\0')));
  EXPECT_ERROR(load(path), "data_offsets [0, 8] fall outside the 4 data bytes");
  write_file(path, with_header(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')));
  EXPECT_ERROR(load(path), "shape [3] of F32 does not match its 8 data bytes");
  write_file(path, with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                               std::string(8, '\0')));
  EXPECT_ERROR(load(path), "overlap");
  write_file(path, with_header(R"({"w":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')));
  EXPECT_ERROR(load(path), "unsupported dtype 'C64'");
  write_file(path, with_header("{not json", ""));
  EXPECT_ERROR(load(path), "the header is not valid JSON");
  std::string huge = with_header(ok_json, std::string(8, '\0'));
  huge[5] = '\x01';  // header length ~1e12
  write_file(path, huge);
  EXPECT_ERROR(load(path), "exceeds the 100 MB limit");
  std::string lying = with_header(ok_json, std::string(8, '\0'));
  lying[0] = static_cast<char>(lying[0] + 100);
  write_file(path, lying);
  EXPECT_ERROR(load(path), "runs past the end of the file");
  write_file(path, with_header(R"({"m":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x07"));
  EXPECT_ERROR(load(path), "BOOL data holds byte 7");
  EXPECT_ERROR(load("/nonexistent.safetensors"), "safetensors: cannot open");
  std::remove(path.c_str());
}
