// tests/data/test_data.cpp — datasets, the DataLoader (order, determinism across worker
// counts, worker errors, early exit, pin_memory fallback), the IDX and CSV readers on small
// fixtures and corrupt files, and transforms.
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "support/test_util.h"

using namespace kiln;
using namespace kiln::data;
using kiln::testing::numbers;
using kiln::testing::values;
using kiln::testing::values_near;

namespace {

std::vector<std::vector<double>> epoch_targets(DataLoader& loader) {
  std::vector<std::vector<double>> out;
  for (const Example& b : loader) out.push_back(values(b.target));
  return out;
}

/// A dataset whose sample 37 cannot be loaded.
struct Faulty : Dataset {
  std::size_t size() const override { return 64; }
  Example get(std::size_t i) const override {
    KILN_CHECK(i != 37, "sample 37 is corrupt");
    return {full({2}, static_cast<double>(i)), tensor(static_cast<std::int64_t>(i))};
  }
};

}  // namespace

TEST(Datasets, TensorDatasetSubsetConcatSplit) {
  auto ds = numbers(10);
  EXPECT_EQ(ds->size(), 10u);
  EXPECT_TRUE(values_near(ds->get(3).data, {3}));
  EXPECT_TRUE(values_near(ds->get_batch({4, 1}).target, {4, 1}));
  Subset sub(ds, {9, 0});
  EXPECT_TRUE(values_near(sub.get(0).target, {9}));
  ConcatDataset cat({ds, std::make_shared<Subset>(ds, std::vector<std::size_t>{5})});
  EXPECT_EQ(cat.size(), 11u);
  EXPECT_TRUE(values_near(cat.get(10).target, {5}));
  auto parts = random_split(ds, {7, 3}, 42);
  auto again = random_split(ds, {7, 3}, 42);
  EXPECT_EQ(parts[0]->indices(), again[0]->indices());
  std::set<std::size_t> all(parts[0]->indices().begin(), parts[0]->indices().end());
  all.insert(parts[1]->indices().begin(), parts[1]->indices().end());
  EXPECT_EQ(all.size(), 10u);
  EXPECT_ERROR(random_split(ds, {5, 4}, 0), "Sum of input lengths does not equal the length of the input dataset!");
  EXPECT_ERROR(TensorDataset(zeros({3, 2}), zeros({4})), "Size mismatch between tensors");
}

TEST(DataLoader, BatchesInOrderWithDropLast) {
  DataLoader loader(numbers(10), {.batch_size = 4, .num_workers = 2});
  EXPECT_EQ(loader.size(), 3u);
  EXPECT_EQ(epoch_targets(loader), (std::vector<std::vector<double>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
  DataLoader dropping(numbers(10), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(dropping.size(), 2u);
  EXPECT_EQ(epoch_targets(dropping).size(), 2u);
}

TEST(DataLoader, SameBatchesForTheSameSeedWhateverTheWorkerCount) {
  std::vector<std::vector<std::vector<double>>> runs;
  for (std::size_t workers : {0, 1, 3}) {
    DataLoader loader(numbers(50), {.batch_size = 8, .shuffle = true, .seed = 7, .num_workers = workers});
    auto first = epoch_targets(loader);
    auto second = epoch_targets(loader);
    EXPECT_NE(first, second);  // reshuffled each epoch
    runs.push_back(first);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
  std::set<double> seen;
  for (const auto& b : runs[0]) seen.insert(b.begin(), b.end());
  EXPECT_EQ(seen.size(), 50u);  // every sample exactly once
}

TEST(DataLoader, AWorkerErrorReachesTheConsumerNamingTheSample) {
  DataLoader loader(std::make_shared<Faulty>(), {.batch_size = 8, .num_workers = 2});
  const std::string msg = kiln::testing::error_of([&] {
    for (const Example& b : loader) (void)b;
  });
  EXPECT_NE(msg.find("DataLoader worker"), std::string::npos) << msg;
  EXPECT_NE(msg.find("while loading batch 4: loading sample 37 failed: sample 37 is corrupt"), std::string::npos) << msg;
}

TEST(DataLoader, LeavingEarlyShutsWorkersDown) {
  DataLoader loader(numbers(10000), {.batch_size = 4, .num_workers = 3, .prefetch_factor = 4});
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < 200; ++round) {
    int taken = 0;
    for (const Example& b : loader) {
      (void)b;
      if (++taken == 2) break;  // the iterator dies here: workers stop and join
    }
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  EXPECT_EQ(loader.stats().batches, 2);
}

TEST(DataLoader, PinMemoryWithoutCudaWarnsOnceAndCarriesOn) {
  if (cuda::is_available()) GTEST_SKIP() << "CUDA is available: batches really are pinned";
  std::vector<std::string> warnings;
  auto previous = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  reset_warnings_given();
  DataLoader loader(numbers(8), {.batch_size = 4, .pin_memory = true});
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (const Example& b : loader) EXPECT_FALSE(b.data.is_pinned());
  }
  set_warning_handler(previous);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("pin_memory=true, but CUDA is not available"), std::string::npos);
  EXPECT_FALSE(loader.stats().pinned);
}

TEST(DataLoader, CustomCollateAndStats) {
  DataLoader loader(numbers(6), {.batch_size = 3, .num_workers = 1, .collate = [](const std::vector<Example>& ex) {
                                   return Example{default_collate(ex).data * 10, default_collate(ex).target};
                                 }});
  auto it = loader.begin();
  EXPECT_TRUE(values_near(it->data, {0, 10, 20}));
  ++it;
  ++it;
  EXPECT_TRUE(it == loader.end());
  EXPECT_EQ(loader.stats().batches, 2);
  EXPECT_GE(loader.stats().consumer_wait_seconds, 0.0);
}

// --- IDX ------------------------------------------------------------------------------------------

namespace {
std::string idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims, const std::string& data) {
  std::string out{'\0', '\0', static_cast<char>(type), static_cast<char>(dims.size())};
  for (std::uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((d >> s) & 0xff);
  }
  return out + data;
}
std::string temp(const std::string& name) { return ::testing::TempDir() + "kiln_data_" + name; }
void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}
}  // namespace

TEST(Idx, ReadsPlainAndGzippedFiles) {
  const std::string plain = temp("labels-idx1-ubyte");
  std::ofstream(plain, std::ios::binary) << idx_bytes(0x08, {3}, std::string("\x07\x00\x09", 3));
  EXPECT_TRUE(values_near(read_idx(plain), {7, 0, 9}));
  const std::string gz = temp("images.gz");
  // Int16 big-endian 0x0102 = 258
  write_gz(gz, idx_bytes(0x0B, {1, 2}, std::string("\x01\x02\xff\xff", 4)));
  Tensor t = read_idx(gz);
  EXPECT_EQ(t.dtype(), kInt16);
  EXPECT_EQ(t.sizes(), IntArrayRef({1, 2}));
  EXPECT_TRUE(values_near(t, {258, -1}));
  std::remove(plain.c_str());
  std::remove(gz.c_str());
}

TEST(Idx, CorruptFilesGiveClearErrors) {
  EXPECT_ERROR(parse_idx(std::vector<std::uint8_t>{0, 1}), "too short for an IDX header");
  auto bytes = [](const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); };
  EXPECT_ERROR(parse_idx(bytes(std::string("\x01\x00\x08\x01") + std::string(4, '\0'))), "bad magic number");
  EXPECT_ERROR(parse_idx(bytes(idx_bytes(0x07, {1}, "x"))), "unknown IDX type code 7");
  EXPECT_ERROR(parse_idx(bytes(idx_bytes(0x08, {5}, "abc"))), "need 5 bytes of data but the file holds 3");
  EXPECT_ERROR(parse_idx(bytes(idx_bytes(0x08, {2}, "abc"))), "need 2 bytes of data but the file holds 3");
  EXPECT_ERROR(parse_idx(bytes(std::string("\x00\x00\x08\x03\x00\x00", 6))), "file is truncated inside its header");
  const std::string gz = temp("broken.gz");
  std::ofstream(gz, std::ios::binary) << "\x1f\x8b\x08\x00garbage";
  EXPECT_ERROR(read_idx(gz), "corrupt gzip data");
  std::remove(gz.c_str());
  EXPECT_ERROR(MNIST::load("/nonexistent", true), "apt-get install dataset-fashion-mnist");
}

TEST(Idx, FashionMnistWhenInstalled) {
  if (!std::filesystem::exists(default_fashion_mnist_root() + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  auto test = FashionMNIST::load(false);
  EXPECT_EQ(test->size(), 10000u);
  EXPECT_EQ(test->images().sizes(), IntArrayRef({10000, 28, 28}));
  Example e = test->get(0);
  EXPECT_EQ(e.data.sizes(), IntArrayRef({1, 28, 28}));
  EXPECT_LE(e.data.max().item<double>(), 1.0);
  EXPECT_EQ(e.target.item<std::int64_t>(), 9);  // the first test image is an ankle boot
  EXPECT_STREQ(FashionMNIST::class_name(9), "Ankle boot");
}

// --- CSV ------------------------------------------------------------------------------------------

TEST(Csv, PerColumnDtypesDefaultingToFloat32) {
  CsvTable t = parse_csv("rooms,area,label\n3,72.5,1\n4,95.0,0\n", {.column_dtypes = {{"label", kInt64}}});
  EXPECT_EQ(t.rows(), 2u);
  EXPECT_EQ(t.column("area").dtype(), kFloat32);  // not Float64: the default dtype
  EXPECT_EQ(t.column("label").dtype(), kInt64);
  EXPECT_TRUE(values_near(t.to_tensor({"rooms", "area"}), {3, 72.5, 4, 95}));
  EXPECT_NE(t.column("area").describe().find("created by read_csv at test_data.cpp:"), std::string::npos);
  CsvTable wide = parse_csv("1;2\n3;4\n", {.delimiter = ';', .header = false, .default_dtype = kFloat64});
  EXPECT_EQ(wide.names, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(wide.to_tensor().dtype(), kFloat64);
  // An empty field in a floating column is a missing value: NaN.
  EXPECT_TRUE(std::isnan(parse_csv("a,b\n1,\n").column("b").item<double>()));
}

TEST(Csv, MalformedFilesNameLineAndColumn) {
  EXPECT_ERROR(parse_csv("a,b\n1,2\n3\n"), "read_csv: line 3 has 1 fields, expected 2");
  EXPECT_ERROR(parse_csv("a,b\n1,x2\n"), "read_csv: line 2, column 'b': cannot parse 'x2' as Float");
  EXPECT_ERROR(parse_csv("a\n1.5\n", {.column_dtypes = {{"a", kInt64}}}), "cannot parse '1.5' as Long");
  EXPECT_ERROR(parse_csv("a\n1\n", {.column_dtypes = {{"b", kInt64}}}), "a dtype was given for column 'b'");
  EXPECT_ERROR(read_csv("/nonexistent.csv"), "read_csv: cannot open");
}

// --- transforms -----------------------------------------------------------------------------------

TEST(Transforms, ToTensorNormalizeCropFlip) {
  Rng rng(0);
  Tensor hwc = tensor({{{0, 255}, {51, 102}}}, kUInt8);  // H=1, W=2, C=2
  Tensor chw = transforms::ToTensor()(hwc, rng);
  EXPECT_EQ(chw.sizes(), IntArrayRef({2, 1, 2}));
  EXPECT_TRUE(values_near(chw, {0, 0.2, 1, 0.4}, 1e-6));
  EXPECT_TRUE(values_near(transforms::Normalize({0.5, 0.0}, {0.5, 2.0})(chw, rng), {-1, -0.6, 0.5, 0.2}, 1e-6));
  Tensor img = arange(16.0).reshape({1, 4, 4});
  Rng a(1), b(1);
  Tensor c1 = transforms::RandomCrop(4, 2)(img, a);
  EXPECT_EQ(c1.sizes(), IntArrayRef({1, 4, 4}));
  EXPECT_EQ(values(c1), values(transforms::RandomCrop(4, 2)(img, b)));  // same stream, same crop
  Tensor flipped = transforms::RandomHorizontalFlip(1.0)(img, rng);
  EXPECT_TRUE(values_near(flipped.select(1, 0), {3, 2, 1, 0}));
}

TEST(Transforms, TransformDatasetIsDeterministicPerSampleAndEpoch) {
  auto base = std::make_shared<TensorDataset>(arange(8.0).reshape({2, 1, 2, 2}), arange(2));
  TransformDataset aug(base, transforms::Compose({transforms::RandomCrop(2, 1), transforms::RandomHorizontalFlip()}), 5);
  const auto first = values(aug.get(1).data);
  EXPECT_EQ(values(aug.get(1).data), first);
  bool changed = false;
  for (int epoch = 1; epoch < 10 && !changed; ++epoch) {
    aug.set_epoch(epoch);
    changed = values(aug.get(1).data) != first;
  }
  EXPECT_TRUE(changed);
}

namespace {

/// The remaining batches of an epoch from `loader`, after the first `skip` of them.
std::vector<std::vector<double>> rest_of_epoch(DataLoader& loader, std::size_t skip) {
  std::vector<std::vector<double>> out;
  std::size_t seen = 0;
  for (const Example& b : loader) {
    if (seen++ >= skip) out.push_back(values(b.target));
  }
  return out;
}

}  // namespace

// A loader restored from a state taken in the middle of an epoch hands out exactly the
// batches the original would have handed out next, in the same order, with or without workers;
// one restored from the end of an epoch starts the next epoch.
TEST(DataLoader, StateResumesMidEpochWithTheSameBatches) {
  for (std::size_t workers : {0u, 2u}) {
    DataLoaderOptions options{.batch_size = 4, .shuffle = true, .seed = 11, .num_workers = workers};
    DataLoader original(numbers(30), options);
    (void)epoch_targets(original);  // epoch 0
    StateDict mid;
    std::vector<std::vector<double>> after_mid;
    std::size_t taken = 0;
    for (const Example& b : original) {  // epoch 1: stop caring after 3 batches
      if (++taken == 3) mid = original.state_dict();
      else if (taken > 3) after_mid.push_back(values(b.target));
    }
    EXPECT_EQ(mid.at("epoch").item<std::int64_t>(), 1);
    EXPECT_EQ(mid.at("batches_yielded").item<std::int64_t>(), 3);

    DataLoader resumed(numbers(30), {.batch_size = 4, .shuffle = true, .seed = 11, .num_workers = 2 - workers});
    resumed.load_state_dict(mid);
    EXPECT_EQ(epoch_targets(resumed), after_mid) << "workers " << workers;
    EXPECT_EQ(resumed.epoch(), 1);
    // Then both go on to the same epoch 2.
    EXPECT_EQ(epoch_targets(resumed), epoch_targets(original));

    // A state taken at an epoch's end continues with the next epoch.
    const StateDict done = original.state_dict();
    DataLoader next(numbers(30), options);
    next.load_state_dict(done);
    EXPECT_EQ(epoch_targets(next), epoch_targets(original));
    EXPECT_EQ(next.epoch(), 3);
  }
}

TEST(DataLoader, StateFromAnotherLoaderIsRefused) {
  DataLoader loader(numbers(30), {.batch_size = 4, .shuffle = true, .seed = 11});
  (void)rest_of_epoch(loader, 0);
  const StateDict state = loader.state_dict();
  DataLoader other_batch(numbers(30), {.batch_size = 5, .shuffle = true, .seed = 11});
  EXPECT_ERROR(other_batch.load_state_dict(state), "saved by a loader with 8 batches per epoch, this one has 6");
  DataLoader other_seed(numbers(30), {.batch_size = 4, .shuffle = true, .seed = 12});
  EXPECT_ERROR(other_seed.load_state_dict(state), "seed 11 and shuffle=1, this one has seed 12");
  EXPECT_ERROR(loader.load_state_dict(StateDict{}), "the state dict is missing 'epoch'");
  // Refused states leave the loader where it was: its next epoch is epoch 1.
  (void)rest_of_epoch(loader, 0);
  EXPECT_EQ(loader.epoch(), 1);
}
