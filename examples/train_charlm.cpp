// examples/train_charlm.cpp — a character-level language model trained on the text of
// Debian's fortunes package (or any file): a small causal Transformer or an LSTM, for a time
// budget, with validation in bits per character, then samples from it.
//   build/examples/train_charlm --model transformer --log charlm.csv --checkpoint charlm.safetensors
//   build/examples/train_charlm --checkpoint charlm.safetensors --generate 400 --prompt "The "
//   bash scripts/plot_log.sh charlm.csv
// Read next: examples/support/charlm.h.
#include <cstdio>
#include <filesystem>
#include <exception>

#include "support/charlm.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  using namespace kiln::examples;
  const CharLmConfig d;
  Flags f("train_charlm", "a character-level language model on the fortunes text (Transformer or LSTM)");
  f.add("model", d.shape.kind, "transformer or lstm");
  f.add("text", default_fortunes_root(), "a text file, or a folder of them (default: Debian's fortunes)");
  f.add("minutes", std::to_string(d.seconds / 60), "training budget in minutes of wall clock");
  f.add("steps", "0", "training budget in steps instead (0 = the time budget)");
  f.add("batch-size", std::to_string(d.batch_size), "windows per step");
  f.add("context", std::to_string(d.shape.context), "characters per window (the model's context)");
  f.add("width", std::to_string(d.shape.width), "embedding width");
  f.add("layers", std::to_string(d.shape.layers), "Transformer or LSTM layers");
  f.add("heads", std::to_string(d.shape.heads), "attention heads (transformer)");
  f.add("hidden", std::to_string(d.shape.hidden), "LSTM hidden size (lstm)");
  f.add("dropout", std::to_string(d.shape.dropout), "dropout in the layers");
  f.add("lr", std::to_string(d.lr), "AdamW's peak learning rate");
  f.add("eval-every", std::to_string(d.eval_every), "steps between validations");
  f.add("seed", "0", "seed for initialisation, batches and sampling");
  f.add("threads", "0", "CPU threads (0 = all cores)");
  f.add("device", "cpu", "cpu or cuda");
  f.add("log", "", "write step,seconds,train_bpc,val_bpc here (CSV, plot with scripts/plot_log.sh)");
  f.add("checkpoint", "", "write the model here after training, or with --generate read it from here");
  f.add("generate", "0", "characters to sample (from --checkpoint if it exists, without training)");
  f.add("temperature", "0.8", "sampling temperature (lower: more likely characters)");
  f.add("prompt", "", "text the samples continue");
  f.parse(argc, argv);
  try {
    if (f.integer("threads") > 0) set_num_threads(static_cast<int>(f.integer("threads")));
    const Device device = f.device("device");
    const std::int64_t count = f.integer("generate");
    const auto seed = static_cast<std::uint64_t>(f.integer("seed"));
    const std::string checkpoint = f.str("checkpoint");
    if (count > 0 && !checkpoint.empty() && std::filesystem::exists(checkpoint)) {
      const auto [model, vocabulary] = load_charlm(checkpoint, device);
      std::printf("%s%s\n", f.str("prompt").c_str(),
                  generate(*model, vocabulary, f.str("prompt"), count, f.num("temperature"), seed, device).c_str());
      return 0;
    }
    CharLmConfig c;
    c.shape.kind = f.str("model");
    c.shape.context = f.integer("context");
    c.shape.width = f.integer("width");
    c.shape.layers = f.integer("layers");
    c.shape.heads = f.integer("heads");
    c.shape.hidden = f.integer("hidden");
    c.shape.dropout = f.num("dropout");
    c.batch_size = f.integer("batch-size");
    c.seconds = f.num("minutes") * 60;
    c.max_steps = f.integer("steps");
    if (c.max_steps > 0) c.seconds = 0;
    c.lr = f.num("lr");
    c.eval_every = std::max<std::int64_t>(1, f.integer("eval-every"));
    c.seed = seed;
    c.device = device;
    c.log = f.str("log");
    c.checkpoint = checkpoint;
    if (c.batch_size <= 0 || c.shape.context <= 0) {
      throw std::invalid_argument("--batch-size and --context must be positive");
    }
    const std::string text = read_text(f.str("text"));
    const auto [model, result] = train_charlm(text, c);
    std::printf("%lld steps in %.0f s: validation %.3f bits/character\n", static_cast<long long>(result.steps),
                result.seconds, result.final_val_bpc);
    const std::int64_t samples = count > 0 ? count : 300;
    for (int i = 0; i < 2; ++i) {
      const std::string sample = generate(*model, result.vocabulary, f.str("prompt"), samples, f.num("temperature"),
                                          seed + static_cast<std::uint64_t>(i), device);
      std::printf("--- sample %d (temperature %s)\n%s%s\n", i + 1, f.str("temperature").c_str(),
                  f.str("prompt").c_str(), sample.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_charlm: %s\n", e.what());
    return 1;
  }
  return 0;
}
