// tests/examples/test_charlm.cpp — train_charlm's pieces on a small text (seconds, not
// minutes): both models learn a text with structure far below the uniform guess, a checkpoint
// brings back the same model and samples, and bad inputs get clear errors. The 5-minute run
// on the fortunes text is an example (README), not a test.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "../../examples/support/charlm.h"

namespace kiln::examples {
namespace {

/// A text whose next character is mostly predictable: words from a small list, in a seeded
/// order, separated by spaces and newlines.
std::string small_text() {
  const std::vector<std::string> words{"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far"};
  std::mt19937 rng(7);
  std::string text;
  for (int i = 0; i < 3000; ++i) text += words[rng() % words.size()] + (i % 9 == 8 ? "\n" : " ");
  return text;
}

CharLmConfig quick(const std::string& kind) {
  CharLmConfig c;
  c.shape = {.kind = kind, .context = 32, .width = 32, .layers = 1, .heads = 2, .hidden = 48};
  c.batch_size = 16;
  c.lr = 1e-2;
  c.warmup_steps = 5;
  c.seconds = 0;
  c.max_steps = 120;
  c.eval_every = 60;
  c.eval_windows = 32;
  c.final_eval_windows = 32;  // the same windows at every validation: the curve compares like with like
  c.quiet = true;
  return c;
}

TEST(CharLm, BothModelsLearnTheTextFarBelowTheUniformGuess) {
  const std::string text = small_text();
  const double uniform = std::log2(static_cast<double>(CharVocabulary(text).size()));  // 14 characters
  for (const std::string kind : {"transformer", "lstm"}) {
    const auto [model, result] = train_charlm(text, quick(kind));
    ASSERT_EQ(result.steps, 120) << kind;
    ASSERT_EQ(result.val_bpc.size(), 2u) << kind;
    EXPECT_LT(result.val_bpc.back().second, result.val_bpc.front().second) << kind;
    // Words of 1-3 letters from ten: the first letter carries most of the surprise.
    EXPECT_LT(result.final_val_bpc, 0.55 * uniform) << kind << ": " << result.final_val_bpc;
  }
}

TEST(CharLm, EachModelHasItsOwnPeakLearningRateUnlessOneIsGiven) {
  CharLmConfig c;
  EXPECT_EQ(c.peak_lr(), 4e-3);
  c.shape.kind = "lstm";
  EXPECT_EQ(c.peak_lr(), 6e-3);
  c.lr = 1e-3;
  EXPECT_EQ(c.peak_lr(), 1e-3);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 100, 0.0), 1e-3);
}

TEST(CharLm, TheLearningRateWarmsUpThenFollowsACosineDownToItsEnd) {
  CharLmConfig c;
  c.lr = 4e-3;
  c.warmup_steps = 50;
  c.lr_end = 0.1;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 0, 0.0), 4e-3 / 50);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 49, 0.01), 4e-3 * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.01))));
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 5000, 0.5), 4e-3 * 0.55);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 9000, 1.0), 4e-4);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 9001, 1.2), 4e-4);  // a time budget overrun stays at the end
  c.lr_end = 0.0;
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 9000, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(c, 5000, 0.5), 2e-3);
}

// --checkpoint-activations changes where the memory goes, not what is learnt: gradients are
// the plain run's bit for bit (dropout included), so every validation figure is too.
TEST(CharLm, CheckpointedActivationsTrainExactlyAsThePlainRun) {
  set_num_threads(get_num_threads());  // bit-for-bit needs a fixed thread count
  const std::string text = small_text();
  CharLmConfig c = quick("transformer");
  c.shape.layers = 2;
  c.shape.dropout = 0.1;
  c.max_steps = 20;
  c.eval_every = 10;
  const auto [plain_model, plain] = train_charlm(text, c);
  c.checkpoint_activations = true;
  const auto [checkpointed_model, checkpointed] = train_charlm(text, c);
  ASSERT_EQ(plain.val_bpc.size(), 2u);
  EXPECT_EQ(checkpointed.val_bpc, plain.val_bpc);
  EXPECT_EQ(checkpointed.final_val_bpc, plain.final_val_bpc);
  const StateDict a = plain_model->state_dict(), b = checkpointed_model->state_dict();
  for (const auto& [name, t] : a.items()) EXPECT_TRUE(t.equal(b.at(name))) << name;
}

TEST(CharLm, ValidationTakesEveryTenthFortuneNotTheTail) {
  // 300 fortunes, "fortune 0\n%\n" ...: validation holds fortunes 9, 19, ..., 299.
  std::string text, expected;
  for (int i = 0; i < 300; ++i) {
    const std::string fortune = "fortune " + std::to_string(i) + "\n%\n";
    text += fortune;
    if (i % 10 == 9) expected += fortune;
  }
  const CharCorpus corpus(text, 0.1, 8);
  std::string validation;
  for (std::int64_t id : corpus.validation) validation.push_back(corpus.vocabulary.decode(id));
  EXPECT_EQ(validation, expected);
  EXPECT_EQ(corpus.train.size() + corpus.validation.size(), text.size());
  // Without separators: 200 equal blocks, every tenth validates.
  const CharCorpus blocks(std::string(2000, 'a') + std::string(2000, 'b'), 0.1, 8);
  EXPECT_EQ(blocks.validation.size(), 400u);
}

TEST(CharLm, ACheckpointBringsBackTheModelItsVocabularyAndItsSamples) {
  const std::string text = small_text();
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "kiln_test_charlm.safetensors";
  CharLmConfig c = quick("transformer");
  c.max_steps = 20;
  c.checkpoint = path.string();
  const auto [model, result] = train_charlm(text, c);
  const auto [loaded, vocabulary] = load_charlm(path.string(), kCPU);
  EXPECT_EQ(vocabulary.list(), CharVocabulary(text).list());
  const CharCorpus corpus(text, c.validation_fraction, c.shape.context);
  EXPECT_DOUBLE_EQ(validation_bpc(*loaded, corpus, c, c.final_eval_windows), result.final_val_bpc);
  const std::string a = generate(*model, vocabulary, "the ", 40, 0.8, 3);
  EXPECT_EQ(a.size(), 40u);
  EXPECT_EQ(generate(*loaded, vocabulary, "the ", 40, 0.8, 3), a);  // same weights, same seed
  for (char ch : a) EXPECT_NE(text.find(ch), std::string::npos);   // only the text's characters
  std::filesystem::remove(path);
}

TEST(CharLm, BadInputsGetClearErrors) {
  const std::string text = small_text();
  const CharVocabulary vocabulary(text);
  EXPECT_THROW(
      {
        try {
          vocabulary.encode("the Zebra");
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("'Z'"), std::string::npos) << e.what();
          throw;
        }
      },
      std::invalid_argument);
  CharLmConfig c = quick("transformer");
  c.shape.kind = "gru";
  EXPECT_THROW(train_charlm(text, c), std::invalid_argument);
  c = quick("transformer");
  c.shape.heads = 5;  // 32 is not divisible by 5
  EXPECT_THROW(train_charlm(text, c), std::invalid_argument);
  EXPECT_THROW(train_charlm("too short", quick("lstm")), std::invalid_argument);
  EXPECT_THROW(read_text("/nonexistent/kiln/text"), std::runtime_error);
  const auto [model, result] = train_charlm(text, [] {
    CharLmConfig q = quick("lstm");
    q.max_steps = 1;
    return q;
  }());
  EXPECT_THROW(generate(*model, vocabulary, "the", 5, 0.0, 0), std::invalid_argument);
  // A safetensors file without the model's metadata is not a train_charlm checkpoint.
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "kiln_test_not_charlm.safetensors";
  save(path.string(), model->state_dict());
  EXPECT_THROW(load_charlm(path.string(), kCPU), std::runtime_error);
  std::filesystem::remove(path);
}

TEST(CharLm, ReadsTheFortunesPackageWhenInstalled) {
  if (!std::filesystem::is_directory(default_fortunes_root())) {
    GTEST_SKIP() << "Debian's fortunes package is not installed (scripts/setup.sh fortunes)";
  }
  const std::string text = read_text(default_fortunes_root());
  EXPECT_GT(text.size(), 1'000'000u);
  EXPECT_NE(text.find("\n%\n"), std::string::npos);  // the fortunes' separator
  EXPECT_GT(CharVocabulary(text).size(), 90);
}

}  // namespace
}  // namespace kiln::examples
