// examples/support/charlm.h — a character-level language model: the text as byte tokens, the
// two models (a pre-norm Transformer encoder with a causal mask, or an LSTM), training for a
// time or step budget with validation in bits per character, checkpoints that carry the
// vocabulary and the model's shape, and sampling. Header-only, like training.h: the program is
// examples/train_charlm.cpp, and tests/examples/test_charlm.cpp trains it on a small text.
// Read next: examples/train_charlm.cpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kiln.h"
#include "training.h"

namespace kiln::examples {

/// Where Debian's `fortunes` package puts its text files (one per topic, fortunes between
/// lines holding "%").
inline std::string default_fortunes_root() { return "/usr/share/games/fortunes"; }

/// Refuses a file that is not text: a model trained on a program's bytes learns nothing useful
/// and its samples would write raw control bytes to the terminal. Text holds no NUL byte and
/// few control characters (the fortunes use tabs, backspaces and bells).
inline void check_is_text(const std::string& bytes, const std::string& path) {
  std::size_t control = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(bytes[i]);
    if (ch == 0) {
      throw std::runtime_error("'" + path + "' is not a text file (a NUL byte at offset " + std::to_string(i) +
                               "): train on text, e.g. --text /usr/share/games/fortunes");
    }
    if ((ch < 32 && ch != '\n' && ch != '\t' && ch != '\r' && ch != '\f' && ch != '\b' && ch != '\a') || ch == 127) {
      ++control;
    }
  }
  if (control * 100 > bytes.size()) {
    throw std::runtime_error("'" + path + "' is not a text file (" + std::to_string(control) + " of its " +
                             std::to_string(bytes.size()) + " bytes are control characters)");
  }
}

/// The text of a file, or of every topic file in a folder (sorted by name; the fortune
/// database's index files, *.dat, and the *.u8 links left out).
inline std::string read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (fs::is_directory(path)) {
    for (const auto& entry : fs::directory_iterator(path)) {
      if (entry.is_regular_file() && !entry.is_symlink() && !entry.path().has_extension()) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) throw std::runtime_error("no text files in '" + path + "'");
  } else if (fs::is_regular_file(path)) {
    files.push_back(path);
  } else {
    throw std::runtime_error("no text at '" + path + "' (install Debian's fortunes package, or pass --text FILE)");
  }
  std::string text;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read '" + f.string() + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string part = ss.str();
    check_is_text(part, f.string());
    text += part;
  }
  if (text.empty()) throw std::runtime_error("'" + path + "' holds no text (an empty file)");
  return text;
}

/// The text as tokens: one per distinct byte, numbered in byte order.
class CharVocabulary {
 public:
  CharVocabulary() = default;
  explicit CharVocabulary(const std::string& text) {
    std::vector<bool> seen(256, false);
    for (unsigned char ch : text) seen[ch] = true;
    for (int b = 0; b < 256; ++b) {
      if (seen[static_cast<std::size_t>(b)]) bytes_.push_back(static_cast<unsigned char>(b));
    }
    index();
  }
  /// From the byte list a checkpoint stores ("10,32,33,...").
  static CharVocabulary parse(const std::string& list) {
    CharVocabulary v;
    std::istringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
      std::int64_t b = -1;
      if (!flag_checks::parse_integer(item, b) || b < 0 || b > 255) {
        throw std::runtime_error("checkpoint's vocabulary holds '" + item + "', expected a byte (0 to 255)");
      }
      v.bytes_.push_back(static_cast<unsigned char>(b));
    }
    v.index();
    return v;
  }
  std::string list() const {
    std::string s;
    for (unsigned char b : bytes_) {
      if (!s.empty()) s.push_back(',');
      s.append(std::to_string(b));
    }
    return s;
  }
  std::int64_t size() const { return static_cast<std::int64_t>(bytes_.size()); }
  std::vector<std::int64_t> encode(const std::string& text) const {
    std::vector<std::int64_t> ids;
    ids.reserve(text.size());
    for (unsigned char ch : text) {
      const std::int64_t id = ids_[ch];
      if (id < 0) {
        std::string message = "the character '";
        message.push_back(static_cast<char>(ch));
        message.append("' (byte ").append(std::to_string(ch)).append(") is not in the model's vocabulary");
        throw std::invalid_argument(message);
      }
      ids.push_back(id);
    }
    return ids;
  }
  char decode(std::int64_t id) const { return static_cast<char>(bytes_.at(static_cast<std::size_t>(id))); }

 private:
  void index() {
    ids_.assign(256, -1);
    for (std::size_t i = 0; i < bytes_.size(); ++i) ids_[bytes_[i]] = static_cast<std::int64_t>(i);
  }
  std::vector<unsigned char> bytes_;
  std::vector<std::int64_t> ids_;
};

/// The model's shape; a checkpoint stores it beside the weights.
struct CharModelShape {
  std::string kind = "transformer";  // or "lstm"
  std::int64_t vocab = 0;
  std::int64_t context = 64;   // characters a prediction sees (the training window)
  std::int64_t width = 128;    // embedding width (d_model)
  std::int64_t layers = 2;
  std::int64_t heads = 4;      // transformer
  std::int64_t hidden = 256;   // LSTM hidden size
  double dropout = 0.0;

  std::map<std::string, std::string> metadata() const {
    return {{"kind", kind},
            {"vocab", std::to_string(vocab)},
            {"context", std::to_string(context)},
            {"width", std::to_string(width)},
            {"layers", std::to_string(layers)},
            {"heads", std::to_string(heads)},
            {"hidden", std::to_string(hidden)},
            {"dropout", std::to_string(dropout)}};
  }
  static CharModelShape from(const std::map<std::string, std::string>& m) {
    auto get = [&](const char* key) -> const std::string& {
      const auto it = m.find(key);
      if (it == m.end()) throw std::runtime_error(std::string("not a train_charlm checkpoint: no '") + key + "'");
      return it->second;
    };
    auto positive = [&](const char* key) {
      std::int64_t v = 0;
      if (!flag_checks::parse_integer(get(key), v) || v < 1 || v > (1 << 20)) {
        throw std::runtime_error(std::string("checkpoint's '") + key + "' is '" + get(key) +
                                 "', expected an integer from 1 to " + std::to_string(1 << 20));
      }
      return v;
    };
    CharModelShape s{get("kind"), positive("vocab"), positive("context"), positive("width"),
                     positive("layers"), positive("heads"), positive("hidden"), 0.0};
    if (!flag_checks::parse_number(get("dropout"), s.dropout) || s.dropout < 0 || s.dropout >= 1) {
      throw std::runtime_error("checkpoint's 'dropout' is '" + get("dropout") + "', expected a number in [0, 1)");
    }
    if (s.kind != "transformer" && s.kind != "lstm") {
      throw std::runtime_error("checkpoint's 'kind' is '" + s.kind + "', expected transformer or lstm");
    }
    if (s.kind == "transformer" && s.width % s.heads != 0) {
      throw std::runtime_error("checkpoint's width " + std::to_string(s.width) + " is not divisible by its " +
                               std::to_string(s.heads) + " heads");
    }
    return s;
  }
};

/// Tokens [B, T] -> next-token logits [B, T, vocab].
class CharModel : public nn::Module {
 public:
  using Module::Module;
  virtual std::int64_t context() const = 0;
};

/// Token and position embeddings, a pre-norm Transformer encoder under a causal mask (each
/// position sees itself and the positions before it), a final LayerNorm and the output layer.
class TransformerCharModel : public CharModel {
 public:
  explicit TransformerCharModel(const CharModelShape& s) : CharModel("TransformerCharModel"), context_(s.context) {
    token = register_module("token", std::make_shared<nn::Embedding>(s.vocab, s.width));
    position = register_module("position", std::make_shared<nn::Embedding>(s.context, s.width));
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(
                                             nn::TransformerEncoderLayerArgs{.d_model = s.width,
                                                                                .nhead = s.heads,
                                                                                .dim_feedforward = 4 * s.width,
                                                                                .dropout = s.dropout,
                                                                                .activation = "relu",
                                                                                .batch_first = true,
                                                                                .norm_first = true},
                                             s.layers, /*final_norm=*/true));
    head = register_module("head", std::make_shared<nn::Linear>(s.width, s.vocab));
  }
  Tensor forward(const Tensor& tokens) override {
    const std::int64_t length = tokens.size(1);
    const Tensor positions = arange(length, TensorOptions(kInt64).device(tokens.device()));
    const Tensor x = (*token)(tokens) + (*position)(positions);
    const Tensor mask = nn::generate_square_subsequent_mask(length, TensorOptions().device(tokens.device()));
    return (*head)(checkpoint_activations ? checkpointed_encoder(x, mask) : (*encoder)(x, mask));
  }
  std::int64_t context() const override { return context_; }

  /// The encoder's layers keep only their inputs for backward and recompute the rest there
  /// (--checkpoint-activations; Note [Activation checkpointing]).
  bool checkpoint_activations = false;

  std::shared_ptr<nn::Embedding> token, position;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::Linear> head;

 private:
  /// What encoder(x, mask) computes, one checkpointed region per layer.
  Tensor checkpointed_encoder(Tensor x, const Tensor& mask) {
    for (std::size_t i = 0; i < encoder->layers->size(); ++i) {
      auto layer = std::static_pointer_cast<nn::TransformerEncoderLayer>((*encoder->layers)[i]);
      x = nn::checkpoint([layer](const Tensor& h, const Tensor& m) { return (*layer)(h, m); }, x, mask);
    }
    return encoder->norm ? (*encoder->norm)(x) : x;
  }

  std::int64_t context_;
};

/// Token embeddings, a (stacked) LSTM and the output layer.
class LstmCharModel : public CharModel {
 public:
  explicit LstmCharModel(const CharModelShape& s) : CharModel("LstmCharModel"), context_(s.context) {
    token = register_module("token", std::make_shared<nn::Embedding>(s.vocab, s.width));
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(
                                       s.width, s.hidden,
                                       nn::RNNBaseOptions{.num_layers = s.layers,
                                                          .batch_first = true,
                                                          .dropout = s.layers > 1 ? s.dropout : 0.0}));
    head = register_module("head", std::make_shared<nn::Linear>(s.hidden, s.vocab));
  }
  Tensor forward(const Tensor& tokens) override {
    return (*head)(std::get<0>((*lstm)((*token)(tokens))));
  }
  std::int64_t context() const override { return context_; }

  std::shared_ptr<nn::Embedding> token;
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;

 private:
  std::int64_t context_;
};

inline std::shared_ptr<CharModel> make_char_model(const CharModelShape& s) {
  if (s.kind == "transformer") {
    if (s.width % s.heads != 0) {
      throw std::invalid_argument("--width " + std::to_string(s.width) + " must be divisible by --heads " +
                                  std::to_string(s.heads));
    }
    return std::make_shared<TransformerCharModel>(s);
  }
  if (s.kind == "lstm") return std::make_shared<LstmCharModel>(s);
  throw std::invalid_argument("unknown --model '" + s.kind + "' (transformer or lstm)");
}

/// AdamW's peak learning rate for each model, the best of a sweep on the 5-minute fortunes run
/// (README): the Transformer 4e-3 (2.5e-3, 6e-3 and 1e-2 end higher), the LSTM 6e-3.
inline double default_lr(const std::string& kind) { return kind == "lstm" ? 6e-3 : 4e-3; }

/// Each model's window (the characters a prediction sees) and windows per step: 1,024
/// characters a step either way. The Transformer's 128 x 8: at the step count a 2-core Zen 5
/// runs in 5 minutes, it ends 0.015-0.02 bits per character lower than 64 x 16 (2.199-2.200
/// against 2.214-2.223 on the fortunes text, README), its step costing 5-12 % more (attention's
/// work grows with the window); a CPU that runs fewer than about 15,000 steps in 5 minutes
/// gains nothing from it. The LSTM keeps 64 x 16.
inline std::int64_t default_context(const std::string& kind) { return kind == "lstm" ? 64 : 128; }
inline std::int64_t default_batch_size(const std::string& kind) { return kind == "lstm" ? 16 : 8; }

struct CharLmConfig {
  CharModelShape shape;
  std::int64_t batch_size = 16;
  std::optional<double> lr;      // AdamW's peak (unset: the model's, default_lr); warm-up, then a cosine decay
  double lr_end = 0.1;           // where the cosine ends, as a fraction of the peak
  std::int64_t warmup_steps = 50;
  double weight_decay = 0.01;
  double clip = 1.0;             // gradient norm
  double seconds = 300;          // training budget (wall clock)
  std::int64_t max_steps = 0;    // or a step budget (0: the time budget alone)
  std::int64_t eval_every = 100; // steps between validations
  std::int64_t eval_windows = 64;  // validation windows (context characters each) during training
  std::int64_t final_eval_windows = 0;  // at the end (0: the whole validation text)
  double validation_fraction = 0.1;
  std::uint64_t seed = 0;
  Device device = kCPU;
  std::string log;         // CSV: step,seconds,train_bpc,val_bpc
  std::string checkpoint;  // safetensors, with the vocabulary and shape as metadata
  std::string export_onnx;  // ONNX file of the trained model, vocabulary in its metadata ("" = none)
  bool quiet = false;
  bool compile = false;    // capture the training step once and replay it (kiln::compile)
  bool checkpoint_activations = false;  // recompute each Transformer layer in backward
  std::string profile_dir;  // --profile: steps 3-5 into this folder (examples/support/step_profiler.h; "" = none)
  bool profile_with_stack = false;  // --profile-with-stack: each op's call stack too

  /// The peak learning rate: --lr, or the model's own.
  double peak_lr() const { return lr.value_or(default_lr(shape.kind)); }
};

struct CharLmResult {
  CharVocabulary vocabulary;  // the text's, which the model's tokens index
  std::int64_t steps = 0;
  double seconds = 0.0;
  double final_val_bpc = 0.0;
  std::vector<std::pair<std::int64_t, double>> val_bpc;  // (step, bits per character)
};

constexpr double kBitsPerNat = 1.0 / std::numbers::ln2;

/// The text split in two, document by document: every document whose turn comes up (an even
/// spread, `validation_fraction` of them) validates, the rest train. A document is one fortune
/// (the text up to a "%" line); a text without separators is cut into 200 equal blocks. Why not
/// the last tenth of the text: the fortunes come in topic files sorted by name, so the tail is
/// whole topics (tao, wisdom, work, zippy) that training never sees, and validation would
/// measure a change of topic instead of how well the model knows fortunes.
struct CharCorpus {
  CharVocabulary vocabulary;
  std::vector<std::int64_t> train, validation;

  CharCorpus(const std::string& text, double validation_fraction, std::int64_t context) : vocabulary(text) {
    const std::vector<std::int64_t> ids = vocabulary.encode(text);
    const std::vector<std::size_t> ends = document_ends(text);
    std::size_t begin = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) {
      const bool validates = std::floor(static_cast<double>(i + 1) * validation_fraction) >
                             std::floor(static_cast<double>(i) * validation_fraction);
      std::vector<std::int64_t>& into = validates ? validation : train;
      into.insert(into.end(), ids.begin() + static_cast<std::ptrdiff_t>(begin),
                  ids.begin() + static_cast<std::ptrdiff_t>(ends[i]));
      begin = ends[i];
    }
    const auto need = static_cast<std::size_t>(context + 1);
    if (train.size() < need || validation.size() < need) {
      throw std::invalid_argument("the text is too short: " + std::to_string(text.size()) +
                                  " characters leave fewer than context + 1 = " + std::to_string(need) +
                                  " for training or validation");
    }
  }

  /// Where each document ends: after each "\n%\n", or 200 equal blocks when there are fewer
  /// separators than that.
  static std::vector<std::size_t> document_ends(const std::string& text) {
    constexpr std::size_t kBlocks = 200;
    const std::string separator = "\n%\n";
    std::vector<std::size_t> ends;
    for (std::size_t at = text.find(separator); at != std::string::npos; at = text.find(separator, at + 1)) {
      ends.push_back(at + separator.size());
    }
    if (ends.size() < kBlocks) {
      ends.clear();
      for (std::size_t b = 1; b <= kBlocks; ++b) ends.push_back(text.size() * b / kBlocks);
    }
    if (ends.back() != text.size()) ends.push_back(text.size());
    return ends;
  }
};

/// Inputs and next-character targets [B, T] from windows starting at `starts` in `ids`.
inline std::pair<Tensor, Tensor> windows(const std::vector<std::int64_t>& ids, const std::vector<std::size_t>& starts,
                                         std::int64_t length, Device device) {
  std::vector<std::int64_t> x, y;
  x.reserve(starts.size() * static_cast<std::size_t>(length));
  y.reserve(x.capacity());
  for (std::size_t s : starts) {
    x.insert(x.end(), ids.begin() + static_cast<std::ptrdiff_t>(s),
             ids.begin() + static_cast<std::ptrdiff_t>(s) + length);
    y.insert(y.end(), ids.begin() + static_cast<std::ptrdiff_t>(s) + 1,
             ids.begin() + static_cast<std::ptrdiff_t>(s) + 1 + length);
  }
  const std::int64_t batch = static_cast<std::int64_t>(starts.size());
  return {tensor(x, {batch, length}).to(device), tensor(y, {batch, length}).to(device)};
}

/// Mean cross-entropy of the next character, in bits, over `windows` evenly spaced validation
/// windows (eval mode, nothing recorded); 0 tiles the whole validation text.
inline double validation_bpc(CharModel& model, const CharCorpus& corpus, const CharLmConfig& c,
                             std::int64_t windows_to_read) {
  NoGradGuard no_grad;
  model.eval();
  const std::int64_t length = model.context();
  const std::size_t last = corpus.validation.size() - static_cast<std::size_t>(length) - 1;
  const std::int64_t count = windows_to_read > 0 ? windows_to_read
                                                 : static_cast<std::int64_t>(corpus.validation.size() - 1) / length;
  double total = 0.0;
  std::int64_t seen = 0;
  for (std::int64_t first = 0; first < count; first += c.batch_size) {
    std::vector<std::size_t> starts;
    for (std::int64_t i = first; i < std::min(count, first + c.batch_size); ++i) {
      starts.push_back(static_cast<std::size_t>(static_cast<double>(last) * static_cast<double>(i) /
                                                static_cast<double>(std::max<std::int64_t>(count - 1, 1))));
    }
    const auto [x, y] = windows(corpus.validation, starts, length, c.device);
    const Tensor logits = model.forward(x);
    total += cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1}), {}, -100, Reduction::Sum)
                 .item<double>();
    seen += y.numel();
  }
  model.train();
  return total / static_cast<double>(seen) * kBitsPerNat;
}

/// The mean cross-entropy of logits [B, T, vocab] against next characters y [B, T].
inline Tensor next_character_loss(const Tensor& logits, const Tensor& y) {
  return cross_entropy(logits.reshape({-1, logits.size(2)}), y.reshape({-1}));
}

/// One optimizer step on next-character targets y [B, T] for inputs x [B, T], the gradient's
/// norm clipped to `clip`; returns the mean cross-entropy (nats) before the step.
inline Tensor train_step(CharModel& model, optim::Optimizer& optimizer, const Tensor& x, const Tensor& y, double clip) {
  // The logits die with the loss's expression, before backward, as they do in PyTorch's
  // `loss_fn(model(x), y).backward()`: a named `logits` (or a temporary of backward()'s own
  // full expression) would hold [B, T, vocab] through backward, whose peak it raises, and
  // which memory::plan's step does not hold (Note [Planning on the meta device]).
  const Tensor loss = next_character_loss(model.forward(x), y);
  optimizer.zero_grad();
  loss.backward();
  optim::clip_grad_norm_(model.parameters(), clip);
  optimizer.step();
  return loss;
}

/// --export-onnx: the trained model as ONNX, input "input" Int64 character ids [N, context]
/// (batch dynamic), output "logits" [N, context, vocabulary]; the vocabulary and the shape go
/// into the model's metadata_props, as into the checkpoint's. The example batch is 3, a size
/// no dim of the model has by default (Note [The batch axis] in onnx/graph_builder.cpp).
inline void export_charlm(CharModel& model, const CharLmConfig& c, const CharVocabulary& vocabulary) {
  std::map<std::string, std::string> metadata = c.shape.metadata();
  metadata["vocabulary"] = vocabulary.list();
  model.to(kCPU);
  const auto start = std::chrono::steady_clock::now();
  const onnx::ExportReport report = onnx::export_model(
      model, {zeros({3, c.shape.context}, TensorOptions().dtype(kInt64))}, c.export_onnx,
      {.dynamic_axes = {"batch"}, .input_names = {"input"}, .output_names = {"logits"},
       .metadata = {metadata.begin(), metadata.end()}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  model.to(c.device);
  if (!c.quiet) {
    std::printf("ONNX model written to %s (%zu nodes, %zu initializers, %zu bytes, in %.3f s)\n",
                c.export_onnx.c_str(), report.nodes, report.initializers, report.bytes, seconds);
  }
}

/// The learning rate of step `step` (from 0), `done` of the budget (time or steps) spent: a
/// linear warm-up over warmup_steps, then a cosine from the peak down to lr_end of it.
inline double scheduled_lr(const CharLmConfig& c, std::int64_t step, double done) {
  const double warm = std::min(1.0, static_cast<double>(step + 1) /
                                        static_cast<double>(std::max<std::int64_t>(c.warmup_steps, 1)));
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(done, 1.0)));
  return c.peak_lr() * warm * (c.lr_end + (1.0 - c.lr_end) * cosine);
}

/// Trains a new model on `text` for the configured budget, validating every `eval_every`
/// steps and at the end; writes the log and the checkpoint when asked.
inline std::pair<std::shared_ptr<CharModel>, CharLmResult> train_charlm(const std::string& text, CharLmConfig c) {
  manual_seed(c.seed);
  const CharCorpus corpus(text, c.validation_fraction, c.shape.context);
  c.shape.vocab = corpus.vocabulary.size();
  std::shared_ptr<CharModel> model = make_char_model(c.shape);
  if (auto transformer = std::dynamic_pointer_cast<TransformerCharModel>(model)) {
    transformer->checkpoint_activations = c.checkpoint_activations;
  }
  model->to(c.device);
  optim::AdamW optimizer(model->parameters(), optim::AdamWOptions(c.peak_lr()).weight_decay(c.weight_decay));
  std::ofstream log;
  if (!c.log.empty()) {
    log.open(c.log, std::ios::trunc);
    if (!log) throw std::runtime_error("cannot write the log '" + c.log + "'");
    log << "step,seconds,train_bpc,val_bpc\n";
  }
  if (!c.quiet) {
    std::int64_t parameters = 0;
    for (const Tensor& p : model->parameters()) parameters += p.numel();
    std::printf("%s: %lld parameters, vocabulary %lld, %zu training and %zu validation characters\n",
                c.shape.kind.c_str(), static_cast<long long>(parameters), static_cast<long long>(c.shape.vocab),
                corpus.train.size(), corpus.validation.size());
  }
  std::mt19937_64 rng(c.seed);
  std::uniform_int_distribution<std::size_t> start_of(0, corpus.train.size() - static_cast<std::size_t>(c.shape.context) - 1);
  const auto begin = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  CharLmResult result;
  result.vocabulary = corpus.vocabulary;
  double train_sum = 0.0;
  std::int64_t train_count = 0;
  auto validate = [&](std::int64_t step, std::int64_t windows_to_read) {
    const double val = validation_bpc(*model, corpus, c, windows_to_read);
    const double train_bpc = train_count > 0 ? train_sum / static_cast<double>(train_count) : 0.0;
    result.val_bpc.emplace_back(step, val);
    if (log.is_open()) log << step << "," << elapsed() << "," << train_bpc << "," << val << "\n" << std::flush;
    if (!c.quiet) {
      std::printf("step %5lld  %6.1fs  train %.3f bpc  validation %.3f bpc  lr %.2e\n", static_cast<long long>(step),
                  elapsed(), train_bpc, val, optimizer.param_groups()[0].options->lr);
      std::fflush(stdout);
    }
    train_sum = 0.0;
    train_count = 0;
  };
  std::int64_t step = 0;
  auto compiled_step = kiln::compile(
      [&](const Tensor& x, const Tensor& y) { return train_step(*model, optimizer, x, y, c.clip); });
  // One progress line per stretch between validations: its count, rate and ETA are the stretch's.
  const auto stretch = [&c] {
    return Progress(c.compile ? "train (compiled)" : "train", static_cast<std::size_t>(c.eval_every));
  };
  Progress progress = stretch();
  StepProfiler profile(c.profile_dir, c.profile_with_stack);
  while ((c.max_steps == 0 || step < c.max_steps) && (c.seconds <= 0 || elapsed() < c.seconds)) {
    const double done = c.max_steps > 0 ? static_cast<double>(step) / static_cast<double>(c.max_steps)
                                        : elapsed() / c.seconds;
    optimizer.param_groups()[0].options->lr = scheduled_lr(c, step, done);
    std::vector<std::size_t> starts(static_cast<std::size_t>(c.batch_size));
    for (std::size_t& s : starts) s = start_of(rng);
    const auto [x, y] = windows(corpus.train, starts, c.shape.context, c.device);
    const Tensor loss = c.compile ? compiled_step(x, y) : train_step(*model, optimizer, x, y, c.clip);
    ++step;
    const double nats = loss.item<double>(), bpc = nats * kBitsPerNat;
    profile.step();
    train_sum += bpc;
    ++train_count;
    if (!c.quiet) {
      const std::int64_t in_stretch = (step - 1) % c.eval_every + 1;
      progress.update(static_cast<std::size_t>(in_stretch), nats,
                      static_cast<std::size_t>(in_stretch * c.batch_size * c.shape.context));
    }
    if (step % c.eval_every == 0) {
      if (!c.quiet) progress.finish();
      // The last step's validation is the final one below, over the whole validation text.
      if (step != c.max_steps) validate(step, c.eval_windows);
      progress = stretch();
    }
  }
  profile.finish();
  validate(step, c.final_eval_windows);
  if (c.compile && !c.quiet) report_compiled(compiled_step);
  result.steps = step;
  result.seconds = elapsed();
  result.final_val_bpc = result.val_bpc.back().second;
  if (!c.checkpoint.empty()) {
    std::map<std::string, std::string> metadata = c.shape.metadata();
    metadata["vocabulary"] = result.vocabulary.list();
    model->to(kCPU);
    save(c.checkpoint, model->state_dict(), metadata);
    model->to(c.device);
    if (!c.quiet) std::printf("wrote %s\n", c.checkpoint.c_str());
  }
  if (!c.export_onnx.empty()) export_charlm(*model, c, result.vocabulary);
  return {model, result};
}

/// A model and its vocabulary from a train_charlm checkpoint.
inline std::pair<std::shared_ptr<CharModel>, CharVocabulary> load_charlm(const std::string& path, Device device) {
  const std::map<std::string, std::string> metadata = load_safetensors_metadata(path);
  const CharModelShape shape = CharModelShape::from(metadata);
  const auto vocabulary = metadata.find("vocabulary");
  if (vocabulary == metadata.end()) throw std::runtime_error("not a train_charlm checkpoint: no 'vocabulary'");
  CharVocabulary v = CharVocabulary::parse(vocabulary->second);
  if (v.size() != shape.vocab) {
    throw std::runtime_error("checkpoint's vocabulary has " + std::to_string(v.size()) + " characters, its model " +
                             std::to_string(shape.vocab));
  }
  std::shared_ptr<CharModel> model = make_char_model(shape);
  model->load_state_dict(load(path));
  model->to(device);
  return {model, v};
}

/// `count` characters after `prompt`, each drawn from softmax(logits / temperature) given the
/// last `context` characters. Deterministic for a seed.
inline std::string generate(CharModel& model, const CharVocabulary& vocabulary, const std::string& prompt,
                            std::int64_t count, double temperature, std::uint64_t seed, Device device = kCPU) {
  if (!(temperature > 0)) throw std::invalid_argument("--temperature must be positive, got " + std::to_string(temperature));
  if (count < 0) throw std::invalid_argument("--generate must not be negative");
  std::vector<std::int64_t> ids = vocabulary.encode(prompt.empty() ? std::string(1, vocabulary.decode(0)) : prompt);
  NoGradGuard no_grad;
  model.eval();
  std::mt19937_64 rng(seed);
  std::string out;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::size_t take = std::min(ids.size(), static_cast<std::size_t>(model.context()));
    const std::vector<std::int64_t> window(ids.end() - static_cast<std::ptrdiff_t>(take), ids.end());
    const Tensor x = tensor(window, {1, static_cast<std::int64_t>(take)}).to(device);
    const Tensor last = model.forward(x).select(1, static_cast<std::int64_t>(take) - 1).squeeze(0);
    const Tensor probabilities = (last.to(kFloat64) / temperature).softmax(0).to(kCPU).contiguous();
    const double* p = probabilities.data_ptr<double>();
    std::discrete_distribution<std::int64_t> draw(p, p + probabilities.numel());
    const std::int64_t next = draw(rng);
    ids.push_back(next);
    out += vocabulary.decode(next);
  }
  model.train();
  return out;
}

}  // namespace kiln::examples
