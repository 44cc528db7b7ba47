// examples/train_charlm.cpp — a character-level language model trained on the text of
// Debian's fortunes package (or any file): a small causal Transformer or an LSTM, for a time
// budget, with validation in bits per character, then samples from it.
//   build/examples/train_charlm --model transformer --log charlm.csv --checkpoint charlm.safetensors
//   build/examples/train_charlm --checkpoint charlm.safetensors --generate 400 --prompt "The "
//   bash scripts/plot_log.sh charlm.csv
//   build/examples/train_charlm --layers 4 --checkpoint-activations   # recompute layers in backward
// Read next: examples/support/charlm.h.
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>

#include "support/charlm.h"
#include "support/training.h"

int main(int argc, char** argv) {
  using namespace kiln;
  using namespace kiln::examples;
  using namespace kiln::examples::flag_checks;
  return run_program("train_charlm", [&] {
    CharLmConfig c;
    std::string text_path = default_fortunes_root(), prompt;
    double minutes = c.seconds / 60, temperature = 0.8;
    std::int64_t generate_count = 0;
    int threads = 0;
    Flags f("train_charlm", "a character-level language model on the fortunes text (Transformer or LSTM)");
    f.add("--model", c.shape.kind, "transformer or lstm")->check(one_of({"transformer", "lstm"}));
    f.add("--text", text_path, "a text file, or a folder of them (default: Debian's fortunes)")
        ->check(existing_path());
    f.add("--minutes", minutes, "training budget in minutes of wall clock")->check(number(0, 1e6, true));
    f.add("--steps", c.max_steps, "training budget in steps instead (0 = the time budget)")
        ->check(integer(0, 1'000'000'000'000));
    std::optional<std::int64_t> batch_size, context;
    f.add("--batch-size", batch_size,
          "windows per step (default: " + std::to_string(default_batch_size("transformer")) +
              " for the Transformer, " + std::to_string(default_batch_size("lstm")) + " for the LSTM)")
        ->check(integer(1, kMaxBatch));
    f.add("--context", context,
          "characters per window, the model's context (default: " + std::to_string(default_context("transformer")) +
              " for the Transformer, " + std::to_string(default_context("lstm")) + " for the LSTM)")
        ->check(integer(1, 1 << 16));
    f.add("--width", c.shape.width, "embedding width")->check(integer(1, 1 << 16));
    f.add("--layers", c.shape.layers, "Transformer or LSTM layers")->check(integer(1, 1024));
    f.add("--heads", c.shape.heads, "attention heads (transformer; they divide --width)")->check(integer(1, 1024));
    f.add("--hidden", c.shape.hidden, "LSTM hidden size (lstm)")->check(integer(1, 1 << 16));
    f.add("--dropout", c.shape.dropout, "dropout in the layers")->check(number(0, 0.99));
    std::ostringstream lr_help;
    lr_help << "AdamW's peak learning rate (default: " << default_lr("transformer") << " for the Transformer, "
            << default_lr("lstm") << " for the LSTM)";
    f.add("--lr", c.lr, lr_help.str())->check(number(0, 1000, /*exclusive_lo=*/true));
    f.add("--lr-end", c.lr_end, "the learning rate the cosine schedule ends at, as a fraction of --lr")
        ->check(number(0, 1));
    f.add("--weight-decay", c.weight_decay, "AdamW's decoupled weight decay")->check(number(0, 1000));
    f.add("--eval-every", c.eval_every, "steps between validations")->check(integer(1, 1'000'000'000'000));
    f.add("--seed", c.seed, "seed for initialisation, batches and sampling")
        ->check(integer(0, std::numeric_limits<std::int64_t>::max()));
    f.add("--threads", threads, "CPU threads (0 = all cores)")->check(integer(0, kMaxNumThreads));
    f.add_switch("--compile", c.compile, "capture the training step once as a graph and replay it (kiln::compile)");
    f.add_switch("--checkpoint-activations", c.checkpoint_activations,
                 "keep only each Transformer layer's input for backward and recompute the layer there: less memory, "
                 "one more forward (nn::checkpoint)");
    CLI::Option* profile = f.add("--profile", c.profile_dir,
          "profile steps 3-5 (after 2 warm-up steps): print the op table, write DIR/trace.json (open in Perfetto) and DIR/step.html (one step drawn)")
        ->check(writable_folder());
    f.add_switch("--profile-with-stack", c.profile_with_stack,
                 "with --profile: record each op's call stack (the table's Source Location, DIR/stacks.txt for flamegraph.pl)")
        ->needs(profile);
    f.add_function("--device", [&c](const std::string& v) { c.device = Device(v); }, "cpu, cuda or cuda:N", "cpu")
        ->check(device());
    f.add("--log", c.log, "write step,seconds,train_bpc,val_bpc here (CSV, plot with scripts/plot_log.sh)")
        ->check(writable_file());
    f.add("--checkpoint", c.checkpoint, "write the model here after training, or with --generate read it from here");
    f.add("--export-onnx", c.export_onnx,
          "after training, write the model here as ONNX (input: Int64 character ids [N, context]; output: logits "
          "[N, context, vocabulary]; the vocabulary in its metadata; see docs/deploy.md)")
        ->check(writable_file());
    f.add("--generate", generate_count, "sample this many characters from --checkpoint, without training")
        ->check(integer(0, 10'000'000));
    f.add("--temperature", temperature, "sampling temperature (lower: more likely characters)")
        ->check(number(0, 100, /*exclusive_lo=*/true));
    f.add("--prompt", prompt, "text the samples continue");
    f.parse(argc, argv);
    c.batch_size = batch_size.value_or(default_batch_size(c.shape.kind));
    c.shape.context = context.value_or(default_context(c.shape.kind));
    if (generate_count > 0) {
      if (c.checkpoint.empty()) throw FlagError("--generate samples from a saved model: give it as --checkpoint FILE");
      if (!std::filesystem::is_regular_file(c.checkpoint)) {
        throw FlagError("--generate reads the model from --checkpoint, and '" + c.checkpoint + "' does not exist");
      }
    } else if (std::string checkpoint = c.checkpoint, why = writable_file()(checkpoint); !why.empty()) {
      throw FlagError("--checkpoint: " + why);
    } else if (c.checkpoint_activations && c.shape.kind != "transformer") {
      throw FlagError("--checkpoint-activations checkpoints the Transformer's layers: it needs --model transformer");
    } else if (c.shape.kind == "transformer" && c.shape.width % c.shape.heads != 0) {
      throw FlagError("--width " + std::to_string(c.shape.width) + " must be divisible by --heads " +
                      std::to_string(c.shape.heads) + " (each head takes an equal share of the width)");
    }
    if (threads > 0) set_num_threads(threads);
    c.seconds = c.max_steps > 0 ? 0 : minutes * 60;

    if (generate_count > 0) {
      const auto [model, vocabulary] = load_charlm(c.checkpoint, c.device);
      std::printf("%s%s\n", prompt.c_str(),
                  generate(*model, vocabulary, prompt, generate_count, temperature, c.seed, c.device).c_str());
      return 0;
    }
    const std::string text = read_text(text_path);
    const auto [model, result] = train_charlm(text, c);
    std::printf("%lld steps in %.0f s: validation %.3f bits/character\n", static_cast<long long>(result.steps),
                result.seconds, result.final_val_bpc);
    for (int i = 0; i < 2; ++i) {
      const std::string sample = generate(*model, result.vocabulary, prompt, 300, temperature,
                                          c.seed + static_cast<std::uint64_t>(i), c.device);
      std::printf("--- sample %d (temperature %g)\n%s%s\n", i + 1, temperature, prompt.c_str(), sample.c_str());
    }
    return 0;
  });
}
