// examples/support/training.h — what the training programs share: command-line flags, a
// progress line, evaluation, a CSV log, checkpoints, TrainingRun (everything around a
// training loop) and train() (the loop itself, for the programs that do not write their own).
// Header-only: each example is one program, and this is the part they have in common.
// Read next: examples/train_mlp.cpp (the loop written out over a TrainingRun).
#pragma once

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "flags.h"
#include "kiln.h"
#include "step_profiler.h"

namespace kiln::examples {

/// Whether standard output is a person's terminal. mpirun hands every rank a pty of its own and
/// forwards it, so isatty() is true under a launcher even when mpirun's output goes to a file.
inline bool writes_to_terminal() {
  const bool launched = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
  return isatty(1) != 0 && !launched;
}

/// A progress line that redraws itself on a terminal and prints plain lines otherwise.
class Progress {
 public:
  Progress(std::string label, std::size_t total)
      : label_(std::move(label)), total_(total), tty_(writes_to_terminal()) {
    start_ = std::chrono::steady_clock::now();
  }
  /// On a terminal, redraws one bar in place; in a log, writes a plain line at every tenth of
  /// the epoch instead (carriage returns make logs unreadable).
  void update(std::size_t done, double loss, std::size_t samples) {
    const double elapsed = seconds();
    const std::size_t tenth = std::max<std::size_t>(total_ / 10, 1);
    if (!tty_ && done % tenth != 0 && done != total_) return;
    const double rate = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0.0;
    const double eta = done > 0 ? elapsed * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
    if (!tty_) {
      std::printf("%s %zu/%zu loss %.4f  %.0f samples/s  ETA %.1fs\n", label_.c_str(), done, total_, loss, rate, eta);
      std::fflush(stdout);
      return;
    }
    const int width = 30;
    const int filled = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(std::max<std::size_t>(total_, 1)));
    std::printf("\r%s [%s%s] %zu/%zu loss %.4f  %.0f samples/s  ETA %.1fs ", label_.c_str(),
                std::string(static_cast<std::size_t>(filled), '#').c_str(),
                std::string(static_cast<std::size_t>(width - filled), '.').c_str(), done, total_, loss, rate, eta);
    std::fflush(stdout);
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void finish() const {
    if (tty_) std::printf("\n");
  }

 private:
  std::string label_;
  std::size_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
};

/// Accuracy (and mean loss) of `model` over `loader`, in eval mode and without recording.
/// With `mixed_precision`, the forward runs under autocast, as it was trained.
inline std::pair<double, double> evaluate(nn::Module& model, data::DataLoader& loader, Device device,
                                          const std::function<Tensor(const Tensor&)>& input,
                                          bool mixed_precision = false) {
  NoGradGuard no_grad;
  amp::autocast region(device.type(), mixed_precision);
  model.eval();
  std::int64_t correct = 0, total = 0;
  double loss_sum = 0.0;
  for (const data::Example& batch : loader) {
    const Tensor x = input(batch.data.to(device)), y = batch.target.to(device);
    const Tensor logits = model.forward(x);
    loss_sum += cross_entropy(logits, y, {}, -100, Reduction::Sum).item<double>();
    correct += (logits.argmax(1) == y).sum().item<std::int64_t>();
    total += y.numel();
  }
  model.train();
  return {static_cast<double>(correct) / static_cast<double>(total), loss_sum / static_cast<double>(total)};
}

struct TrainConfig {
  std::int64_t epochs = 10;
  std::int64_t batch_size = 128;  // 0: auto, the largest whose step fits (memory::max_batch)
  bool plan = false;              // print the step's memory plan and exit without training
  double lr = 1e-3;
  std::string optimizer = "adam";
  std::uint64_t seed = 0;
  std::size_t workers = 0;
  Device device = kCPU;
  std::string checkpoint;  // safetensors path ("" = none)
  std::string export_onnx;  // ONNX path for the trained prediction path ("" = none)
  std::string log;         // CSV path ("" = none)
  std::string data_root = data::default_fashion_mnist_root();
  std::int64_t limit = 0;  // use only this many training samples (0 = all), for quick runs
  bool mixed_precision = false;  // autocast (CUDA Float16 / CPU BFloat16) + GradScaler
  std::string checkpoint_dir;            // training checkpoints go here ("" = none)
  std::int64_t checkpoint_every = 0;     // steps between checkpoints (0 = at each epoch's end)
  std::size_t keep_checkpoints = 3;      // the newest this many are kept
  bool resume = false;                   // continue from checkpoint_dir's newest valid checkpoint
  bool overwrite = false;                // replace another run's checkpoints in checkpoint_dir
  bool compile = false;                  // capture the step once and replay it (kiln::compile)
  int threads = 0;                       // CPU threads (0: adaptive, fixed when checkpointing)
  std::string profile_dir;               // profile a few steps after warm-up into this folder ("" = none)
  bool profile_with_stack = false;       // --profile-with-stack: each op's call stack too
  // Where tests kill a run: after each step (the global step count), after each epoch's end
  // (its checkpoint written), and inside a checkpoint write (CheckpointDirOptions).
  std::function<void(std::int64_t step)> after_step{};
  std::function<void(std::int64_t epoch)> after_epoch{};
  std::function<void(const std::string& unpublished_path)> before_checkpoint_publish{};
};

// The flags' ranges (Note [Flags are checked before work]).
inline constexpr std::int64_t kMaxEpochs = 1'000'000;
inline constexpr std::int64_t kMaxBatch = 1 << 20;
inline constexpr std::int64_t kMaxWorkers = 256;
inline constexpr std::int64_t kMaxSamples = 1'000'000'000;

/// Which of the shared flags a program takes: train_ddp has no memory plan and no checkpoint
/// folder, so it does not offer their flags at all.
struct TrainingFlags {
  bool memory_plan = true;   // --plan and --batch-size auto
  bool checkpoints = true;   // --checkpoint-dir, --checkpoint-every, --keep-checkpoints, --resume, --overwrite
  bool profile = true;       // --profile DIR (steps 3-5 profiled)
  bool export_onnx = false;  // --export-onnx FILE (the Fashion-MNIST programs)
};

/// A batch size: a positive integer, or "auto" where the program can plan one.
inline CLI::Validator batch_size_check(bool allow_auto) {
  return CLI::Validator(
      [allow_auto](std::string& value) -> std::string {
        std::int64_t v = 0;
        if (allow_auto && value == "auto") return {};
        if (flag_checks::parse_integer(value, v) && v >= 1 && v <= kMaxBatch) return {};
        return "expected an integer from 1 to " + std::to_string(kMaxBatch) + (allow_auto ? " or auto" : "") +
               ", got '" + value + "'";
      },
      allow_auto ? "1.." + std::to_string(kMaxBatch) + "|auto" : "1.." + std::to_string(kMaxBatch));
}

/// Declares the flags the training programs share, each bound to its field of `c` (whose
/// values are the defaults --help shows).
inline void add_training_flags(Flags& f, TrainConfig& c, TrainingFlags which = {}) {
  using namespace flag_checks;
  f.add("--epochs", c.epochs, "passes over the training set")->check(integer(1, kMaxEpochs));
  f.add_function(
       "--batch-size",
       [&c](const std::string& v) {
         std::int64_t n = 0;
         c.batch_size = flag_checks::parse_integer(v, n) ? n : 0;  // the check let only "auto" through otherwise
       },
       which.memory_plan ? "samples per step, or auto: the largest batch whose planned step fits the device's free "
                           "memory"
                         : "samples per step",
       std::to_string(c.batch_size))
      ->check(batch_size_check(which.memory_plan));
  if (which.memory_plan) {
    f.add_switch("--plan", c.plan, "print the memory plan of one training step (kiln::memory::plan) and exit");
  }
  f.add("--lr", c.lr, "learning rate (peak of the cosine schedule)")->check(number(0, 1000, /*exclusive_lo=*/true));
  f.add("--optimizer", c.optimizer, "adam, adamw or sgd (momentum 0.9)")->check(one_of({"adam", "adamw", "sgd"}));
  f.add("--seed", c.seed, "seed for initialisation and shuffling")
      ->check(integer(0, std::numeric_limits<std::int64_t>::max()));
  f.add("--workers", c.workers, "DataLoader worker threads")->check(integer(0, kMaxWorkers));
  f.add_function(
       "--device", [&c](const std::string& v) { c.device = Device(v); }, "cpu, cuda or cuda:N", c.device.str())
      ->check(device());
  f.add("--checkpoint", c.checkpoint, "write the trained weights here (safetensors)")->check(writable_file());
  if (which.export_onnx) {
    f.add("--export-onnx", c.export_onnx,
          "after training, write the model with its input normalisation here as ONNX (input: Float32 pixels in "
          "[0, 1], [N, 1, 28, 28]; output: logits [N, 10]; see docs/deploy.md)")
        ->check(writable_file());
  }
  f.add("--log", c.log, "write per-epoch loss/accuracy here (CSV, plot with scripts/plot_log.sh)")
      ->check(writable_file());
  f.add("--data", c.data_root, "Fashion-MNIST folder")->check(existing_folder());
  f.add("--limit", c.limit, "train on only this many samples (0 = all)")->check(integer(0, kMaxSamples));
  if (which.checkpoints) {
    f.add("--checkpoint-dir", c.checkpoint_dir,
          "write training checkpoints (model, optimizer, schedule, data position, RNG) into this folder")
        ->check(writable_folder());
    f.add("--checkpoint-every", c.checkpoint_every, "steps between checkpoints (0 = each epoch)")
        ->check(integer(0, std::numeric_limits<std::int64_t>::max()));
    f.add("--keep-checkpoints", c.keep_checkpoints, "how many of the newest checkpoints to keep (0 = all)")
        ->check(integer(0, 1'000'000));
    f.add_switch("--resume", c.resume, "continue the run in --checkpoint-dir from its newest valid checkpoint");
    f.add_switch("--overwrite", c.overwrite, "replace the checkpoints another run left in --checkpoint-dir");
  }
  f.add_switch("--compile", c.compile, "capture the training step once as a graph and replay it (kiln::compile)");
  if (which.profile) {
    CLI::Option* profile = f.add("--profile", c.profile_dir,
          "profile steps 3-5 (after 2 warm-up steps): print the op table, write DIR/trace.json (open in Perfetto) and DIR/step.html (one step drawn)")
        ->check(writable_folder());
    f.add_switch("--profile-with-stack", c.profile_with_stack,
                 "with --profile: record each op's call stack (the table's Source Location, DIR/stacks.txt for flamegraph.pl)")
        ->needs(profile);
  }
  f.add("--threads", c.threads,
        "CPU threads (0 = all cores, backing off when the machine is busy; fixed when checkpointing)")
      ->check(integer(0, kMaxNumThreads));
}

/// The flags that define a run: a resumed run must be given the same ones (it cannot honour
/// a new learning rate or optimizer halfway through a schedule), so the checkpoint keeps them.
inline std::map<std::string, std::string> run_flags(const TrainConfig& c) {
  // The shortest text that reads back as the same double: exact, and what the user typed.
  char lr[32];
  const auto written = std::to_chars(lr, lr + sizeof lr, c.lr);
  *written.ptr = '\0';
  return {{"epochs", std::to_string(c.epochs)},
          {"batch-size", c.batch_size == 0 ? "auto" : std::to_string(c.batch_size)},
          {"lr", lr},                                  {"optimizer", c.optimizer},
          {"seed", std::to_string(c.seed)},            {"limit", std::to_string(c.limit)},
          {"mixed-precision", c.mixed_precision ? "on" : "off"}};
}

inline std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const TensorList& params) {
  if (c.optimizer == "adam") return std::make_unique<optim::Adam>(params, optim::AdamOptions(c.lr));
  if (c.optimizer == "adamw") return std::make_unique<optim::AdamW>(params, optim::AdamWOptions(c.lr));
  if (c.optimizer == "sgd") return std::make_unique<optim::SGD>(params, optim::SGDOptions(c.lr).momentum(0.9));
  throw std::invalid_argument("unknown optimizer '" + c.optimizer + "' (adam, adamw, sgd)");
}

struct TrainResult {
  double test_accuracy = 0.0;
  double seconds_per_epoch = 0.0;
  double samples_per_second = 0.0;
  std::vector<double> train_losses;  // mean training loss of each epoch
};

/// The loop's numbers a checkpoint carries besides the pieces' own state.
struct LoopPosition {
  std::int64_t epoch = 1;        // the epoch in progress (1-based)
  bool epoch_done = false;       // saved after that epoch's end (schedule stepped, evaluated)
  std::int64_t step = 0;         // training steps so far, all epochs
  double loss_sum = 0.0;         // this epoch's so far
  std::int64_t steps = 0, samples = 0;
  std::vector<double> train_losses;
  double test_accuracy = 0.0;

  /// The start of the following epoch: its own sums at zero, the run's totals kept.
  LoopPosition next_epoch() const {
    return {.epoch = epoch + 1, .step = step, .train_losses = train_losses, .test_accuracy = test_accuracy};
  }

  /// As exact text ("%.17g" round-trips a double), so a resumed run's sums are bit-identical.
  std::map<std::string, std::string> values() const {
    std::map<std::string, std::string> v;
    auto exact = [](double x) {
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.17g", x);
      return std::string(buffer);
    };
    v["epoch"] = std::to_string(epoch);
    v["epoch_done"] = epoch_done ? "1" : "0";
    v["step"] = std::to_string(step);
    v["loss_sum"] = exact(loss_sum);
    v["steps"] = std::to_string(steps);
    v["samples"] = std::to_string(samples);
    v["test_accuracy"] = exact(test_accuracy);
    std::string losses;
    for (double l : train_losses) losses += (losses.empty() ? "" : " ") + exact(l);
    v["train_losses"] = losses;
    return v;
  }
  static LoopPosition from(const std::map<std::string, std::string>& v) {
    auto get = [&](const char* key) -> const std::string& {
      const auto it = v.find(key);
      if (it == v.end()) throw std::runtime_error(std::string("checkpoint lacks the loop value '") + key + "'");
      return it->second;
    };
    auto integer = [&](const char* key) {
      std::int64_t x = 0;
      if (!flag_checks::parse_integer(get(key), x) || x < 0) {
        throw std::runtime_error(std::string("checkpoint's loop value '") + key + "' is '" + get(key) +
                                 "', expected a non-negative integer");
      }
      return x;
    };
    auto number = [&](const char* key, const std::string& text) {
      double x = 0;
      if (!flag_checks::parse_number(text, x)) {
        throw std::runtime_error(std::string("checkpoint's loop value '") + key + "' holds '" + text +
                                 "', expected a number");
      }
      return x;
    };
    LoopPosition p;
    p.epoch = integer("epoch");
    p.epoch_done = get("epoch_done") == "1";
    p.step = integer("step");
    p.loss_sum = number("loss_sum", get("loss_sum"));
    p.steps = integer("steps");
    p.samples = integer("samples");
    p.test_accuracy = number("test_accuracy", get("test_accuracy"));
    std::istringstream losses(get("train_losses"));
    for (std::string l; losses >> l;) p.train_losses.push_back(number("train_losses", l));
    return p;
  }
};

/// The checkpoint folder of a run (none without --checkpoint-dir), refused before any work when
/// it holds another run's checkpoints and neither --resume nor --overwrite says what to do
/// with them.
inline std::optional<checkpoint::CheckpointDir> open_checkpoint_dir(const TrainConfig& c) {
  if (c.checkpoint_dir.empty()) {
    if (c.resume) throw FlagError("--resume needs --checkpoint-dir (the folder of the run to continue)");
    if (c.overwrite) throw FlagError("--overwrite needs --checkpoint-dir (the folder whose checkpoints it replaces)");
    return std::nullopt;
  }
  if (c.resume && c.overwrite) throw FlagError("--resume and --overwrite contradict each other: give one");
  std::optional<checkpoint::CheckpointDir> dir;
  dir.emplace(c.checkpoint_dir, checkpoint::CheckpointDirOptions{.keep_last = c.keep_checkpoints,
                                                                 .overwrite = c.overwrite,
                                                                 .before_publish = c.before_checkpoint_publish});
  if (!c.resume && !c.overwrite) {
    const std::vector<std::string> existing = dir->list();
    if (!existing.empty()) {
      throw FlagError("--checkpoint-dir '" + c.checkpoint_dir + "' holds another run's checkpoints (" +
                      std::to_string(existing.size()) + ", the newest " +
                      std::filesystem::path(existing.back()).filename().string() +
                      "): pass --resume to continue that run, or --overwrite to replace it");
    }
  }
  return dir;
}

/// Refuses to resume a run with flags that differ from the ones it was saved with: its
/// optimizer state and schedule belong to those (older checkpoints, which did not record
/// them, are not checked).
inline void check_same_run(const TrainConfig& c, const std::map<std::string, std::string>& saved,
                           const std::string& path) {
  for (const auto& [flag, value] : run_flags(c)) {
    const auto it = saved.find("run." + flag);
    if (it == saved.end() || it->second == value) continue;
    auto shown = [&flag](const std::string& v) {
      return flag == "mixed-precision" ? "mixed precision " + v : "--" + flag + " " + v;
    };
    throw FlagError(shown(value) + " differs from the run being resumed (" +
                    std::filesystem::path(path).filename().string() + " was saved with " + shown(it->second) +
                    "): a resumed run keeps the flags it started with; resume with the same ones, or start anew "
                    "with --overwrite or another --checkpoint-dir");
  }
}

inline constexpr const char* kLogHeader = "epoch,train_loss,test_loss,test_accuracy,seconds,samples_per_second";

/// The CSV log, opened for appending. A fresh run starts it with its header. A resumed run
/// keeps the header once and one line for each epoch its checkpoint had finished (the first
/// such line: a run killed between writing an epoch's line and its checkpoint wrote it
/// twice), and drops the rest, so that the epochs it runs again are not repeated.
inline std::ofstream open_log(const std::string& path, bool resumed, std::size_t finished_epochs) {
  std::vector<std::string> kept;
  if (resumed) {
    std::ifstream in(path);
    std::set<std::int64_t> seen;
    for (std::string line; std::getline(in, line);) {
      std::int64_t epoch = 0;
      if (!flag_checks::parse_integer(line.substr(0, line.find(',')), epoch)) continue;  // the header, or junk
      if (epoch >= 1 && epoch <= static_cast<std::int64_t>(finished_epochs) && seen.insert(epoch).second) {
        kept.push_back(line);
      }
    }
  }
  const std::string unpublished = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(unpublished, std::ios::trunc);
    out << kLogHeader << "\n";
    for (const std::string& line : kept) out << line << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write the log '" + path + "'");
  }
  std::error_code error;
  std::filesystem::rename(unpublished, path, error);
  if (error) throw std::runtime_error("cannot write the log '" + path + "': " + error.message());
  std::ofstream log(path, std::ios::app);
  if (!log) throw std::runtime_error("cannot write the log '" + path + "'");
  return log;
}

/// What a compiled step did, in one line: how often it captured, replayed or ran eagerly, and
/// the size of its graph and arena.
template <class Step>
void report_compiled(const Step& step) {
  const compiler::CompileStats& s = step.stats();
  std::printf("compiled step: %lld captured, %lld replayed, %lld eager", static_cast<long long>(s.captures),
              static_cast<long long>(s.replays), static_cast<long long>(s.eager_calls));
  if (s.replays > 0) {
    const compiler::Graph& g = step.graph();
    constexpr double kMiB = 1 << 20;
    std::printf("; %zu kernels, %zu regions, arena %.1f MiB for %.1f MiB of temporaries",
                g.count(compiler::Node::Kind::Kernel), g.count(compiler::Node::Kind::Region),
                static_cast<double>(g.memory.bytes) / kMiB, static_cast<double>(g.memory.temporary_bytes) / kMiB);
  }
  if (!step.eager_reason().empty()) std::printf(" (eager: %s)", step.eager_reason().c_str());
  std::printf("\n");
}

/// --batch-size auto and --plan: picks the largest batch whose planned step fits (setting
/// `batch_size`), and with --plan prints the plan of a step at that batch. Returns a result
/// when the program should stop there (--plan), nothing when it should train.
inline std::optional<TrainResult> plan_memory(nn::Module& model, const data::Dataset& train, const TrainConfig& c,
                                              const std::function<Tensor(const Tensor&)>& input,
                                              std::int64_t& batch_size) {
  // The shapes the model sees: one example's, batched and passed through `input` on the
  // meta device (no data).
  const data::Example example = train.get(0);
  auto input_spec = [&](std::int64_t batch) {
    std::vector<std::int64_t> sizes{batch};
    for (std::int64_t s : example.data.sizes()) sizes.push_back(s);
    const Tensor x = input(empty(sizes, TensorOptions().dtype(example.data.dtype()).device(kMeta)));
    return memory::TensorSpec{std::vector<std::int64_t>(x.sizes().begin(), x.sizes().end()), x.dtype()};
  };
  auto target_spec = [&](std::int64_t batch) { return memory::TensorSpec{{batch}, example.target.dtype()}; };
  const memory::OptimizerFactory optimizer = [&](const TensorList& p) { return make_optimizer(c, p); };
  const memory::PlanOptions options{.device = c.device, .mixed_precision = c.mixed_precision};
  if (batch_size == 0) {
    const memory::BatchSearch found = memory::max_batch(model, input_spec(1), target_spec(1), optimizer, options, 0,
                                                        static_cast<std::int64_t>(train.size()));
    if (found.batch == 0) {
      throw std::runtime_error("--batch-size auto: not even a batch of 1 fits in " + format_memory_size(found.budget) +
                               " on " + c.device.str() + "\n" + found.plan.summary());
    }
    batch_size = found.batch;
    std::printf("--batch-size auto: %lld, the largest batch whose planned step fits in %s on %s (peak reserved %s; "
                "%d plans)\n",
                static_cast<long long>(batch_size), format_memory_size(found.budget).c_str(), c.device.str().c_str(),
                format_memory_size(found.plan.peak_reserved).c_str(), found.plans);
  }
  if (!c.plan) return std::nullopt;
  std::printf("%s", memory::plan(model, input_spec(batch_size), target_spec(batch_size), optimizer, options)
                        .summary()
                        .c_str());
  std::printf("batch %lld, %s, %s%s: planned, not run (--plan)\n", static_cast<long long>(batch_size),
              c.optimizer.c_str(), c.device.str().c_str(), c.mixed_precision ? ", autocast" : "");
  return TrainResult{};
}

/// What a Fashion-MNIST program predicts with: `model` behind `input` (the program's
/// normalisation and reshaping), so that an exported file takes the pixels themselves.
struct PredictionPath : nn::Module {
  nn::Module& model;
  std::function<Tensor(const Tensor&)> input;
  PredictionPath(nn::Module& m, std::function<Tensor(const Tensor&)> prepare)
      : Module("PredictionPath"), model(m), input(std::move(prepare)) {
    // The program owns the model; registering it only names its weights ("model.fc1.weight").
    register_module("model", std::shared_ptr<nn::Module>(&model, [](nn::Module*) {}));
  }
  Tensor forward(const Tensor& images) override { return model.forward(input(images)); }
};

/// --export-onnx: the trained prediction path as ONNX, input "input" [N, 1, 28, 28] Float32 with
/// a dynamic batch axis, output "logits" [N, 10].
inline void export_prediction_path(nn::Module& model, const std::function<Tensor(const Tensor&)>& input,
                                   const std::string& path) {
  PredictionPath whole(model, input);
  const auto start = std::chrono::steady_clock::now();
  const onnx::ExportReport report =
      onnx::export_model(whole, {rand({2, 1, 28, 28})}, path,
                         {.dynamic_axes = {"batch"}, .input_names = {"input"}, .output_names = {"logits"}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("ONNX model written to %s (%zu nodes, %zu initializers, %zu bytes, %.2f s)\n", path.c_str(),
              report.nodes, report.initializers, report.bytes, seconds);
}

/// What goes around a training loop, set up from the flags in this order: the checkpoint
/// folder (refused before any work when it holds another run's), the training set cut to
/// --limit, the batch size (--batch-size auto, --plan), the loaders, the model on its device,
/// the optimizer with its cosine schedule and a GradScaler, the CPU threads, the position a
/// --resume continues from, and the CSV log. A program writes its loop over these
/// (examples/train_mlp.cpp does, in full); train() below is that loop with the tests' hooks.
class TrainingRun {
 public:
  TrainingRun(nn::Module& model, std::shared_ptr<data::Dataset> train_set, std::shared_ptr<data::Dataset> test_set,
              const TrainConfig& c, std::function<Tensor(const Tensor&)> input)
      : config(c), model(model), input(std::move(input)), train_set(std::move(train_set)),
        scaler({.enabled = c.mixed_precision}) {
    checkpoints_ = open_checkpoint_dir(c);
    if (c.limit > 0 && static_cast<std::size_t>(c.limit) < this->train_set->size()) {
      std::vector<std::size_t> first(static_cast<std::size_t>(c.limit));
      for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
      this->train_set = std::make_shared<data::Subset>(this->train_set, first);
    }
    batch_size = c.batch_size;
    if (batch_size == 0 || c.plan) {
      if (plan_memory(model, *this->train_set, c, this->input, batch_size)) {
        planned_only_ = true;
        return;
      }
    }
    train_loader.emplace(this->train_set,
                         data::DataLoaderOptions{.batch_size = static_cast<std::size_t>(batch_size), .shuffle = true,
                                                 .seed = c.seed, .num_workers = c.workers,
                                                 .pin_memory = c.device.is_cuda()});
    test_loader.emplace(std::move(test_set), data::DataLoaderOptions{.batch_size = 1000, .num_workers = c.workers});
    model.to(c.device);
    optimizer = make_optimizer(c, model.parameters());
    schedule.emplace(*optimizer, c.epochs);

    // Bit-identical resumption needs the same thread count before and after the kill: oneDNN's
    // last bits depend on it, and the adaptive count backs off when the machine is busy.
    if (c.threads > 0) {
      set_num_threads(c.threads);
    } else if (checkpoints_) {
      set_num_threads(get_num_threads());
      std::printf("checkpointing: CPU threads fixed at %d, so a resumed run computes the same bits (--threads to "
                  "choose)\n", get_num_threads());
    }
    state_ = {.model = &model, .optimizer = optimizer.get(), .scheduler = &*schedule, .scaler = &scaler,
              .loader = &*train_loader};
    bool resumed = false;
    if (c.resume) {
      if (const auto found = checkpoints_->latest()) {
        check_same_run(c, found->contents.values, found->path);
        checkpoint::restore(state_, found->contents.tensors);
        at = LoopPosition::from(found->contents.values);
        resumed = true;
        std::printf("resumed from %s: epoch %lld%s, step %lld\n", found->path.c_str(), static_cast<long long>(at.epoch),
                    at.epoch_done ? " done" : "", static_cast<long long>(at.step));
        if (at.epoch_done) at = at.next_epoch();
      } else {
        std::printf("no valid checkpoint in %s: starting fresh\n", c.checkpoint_dir.c_str());
      }
    }
    if (!c.log.empty()) log_ = open_log(c.log, resumed, at.train_losses.size());
    std::printf("%s\n%lld parameters, %zu training samples, batch %lld, %s lr %g, %lld epochs on %s\n",
                model.repr().c_str(), static_cast<long long>(model.num_parameters()), this->train_set->size(),
                static_cast<long long>(batch_size), c.optimizer.c_str(), c.lr, static_cast<long long>(c.epochs),
                c.device.str().c_str());
  }
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  /// --plan printed a training step's memory plan: there is nothing to train.
  bool planned_only() const { return planned_only_; }

  /// Whether the epoch in progress has batches left: a run resumed from a checkpoint taken
  /// after an epoch's last step has them behind it, and the loader would start the next
  /// epoch's.
  bool batches_left() const { return at.steps < static_cast<std::int64_t>(train_loader->size()); }

  /// After each training step, once `at` counts it: a checkpoint every --checkpoint-every steps.
  void after_step() {
    if (checkpoints_ && config.checkpoint_every > 0 && at.step % config.checkpoint_every == 0) save_checkpoint();
    if (config.after_step) config.after_step(at.step);
  }

  /// After an epoch's evaluation: prints the epoch's line and appends it to the log, and
  /// checkpoints at each epoch's end (without --checkpoint-every) and at the end
  /// of training, so that the folder's newest checkpoint is the finished run (a step-interval
  /// checkpoint of this same step is replaced: same name, epoch now done).
  void end_epoch(double train_loss, double test_loss, double accuracy, double seconds, double samples) {
    train_seconds_ += seconds;
    samples_seen_ += static_cast<std::size_t>(samples);
    ++epochs_run_;
    std::printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.2fs (%.0f samples/s)",
                static_cast<long long>(at.epoch), train_loss, test_loss, 100 * accuracy, seconds, samples / seconds);
    if (config.mixed_precision) std::printf(", loss scale %g", scaler.get_scale());
    std::printf("\n");
    if (log_.is_open()) {
      log_ << at.epoch << "," << train_loss << "," << test_loss << "," << accuracy << "," << seconds << ","
           << samples / seconds << "\n" << std::flush;
    }
    at.test_accuracy = accuracy;
    at.train_losses.push_back(train_loss);
    at.epoch_done = true;
    if (checkpoints_ && (config.checkpoint_every == 0 || at.epoch == config.epochs)) save_checkpoint();
    if (config.after_epoch) config.after_epoch(at.epoch);
  }

  /// After the last epoch: --checkpoint's weights, --export-onnx's model and the final line.
  TrainResult finish() const {
    TrainResult result;
    result.test_accuracy = at.test_accuracy;
    result.train_losses = at.train_losses;
    result.seconds_per_epoch = epochs_run_ > 0 ? train_seconds_ / static_cast<double>(epochs_run_) : 0.0;
    result.samples_per_second = train_seconds_ > 0 ? static_cast<double>(samples_seen_) / train_seconds_ : 0.0;
    if (!config.checkpoint.empty()) {
      save(config.checkpoint, model.state_dict(), {{"format", "pt"}, {"model", model.type_name()}});
      std::printf("checkpoint written to %s\n", config.checkpoint.c_str());
    }
    if (!config.export_onnx.empty()) export_prediction_path(model, input, config.export_onnx);
    std::printf("final test accuracy %.2f%% (%.2fs per epoch)\n", 100 * result.test_accuracy,
                result.seconds_per_epoch);
    return result;
  }

  const TrainConfig& config;
  nn::Module& model;
  const std::function<Tensor(const Tensor&)> input;  // a batch of images as the model takes it
  std::shared_ptr<data::Dataset> train_set;          // cut to --limit
  std::int64_t batch_size = 0;                       // --batch-size, or the planned one
  std::optional<data::DataLoader> train_loader, test_loader;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::optional<optim::CosineAnnealingLR> schedule;
  amp::GradScaler scaler;  // disabled (a pass-through) unless mixed precision is on
  LoopPosition at;         // where the loop is; a resumed run starts where its checkpoint left off

 private:
  void save_checkpoint() {
    state_.values = at.values();
    for (const auto& [flag, value] : run_flags(config)) state_.values["run." + flag] = value;
    checkpoints_->save(at.step, state_);
  }

  std::optional<checkpoint::CheckpointDir> checkpoints_;
  checkpoint::TrainingState state_;
  std::ofstream log_;
  bool planned_only_ = false;
  double train_seconds_ = 0.0;
  std::size_t samples_seen_ = 0;
  std::int64_t epochs_run_ = 0;
};

/// Trains `model` with cross-entropy and a cosine schedule, evaluating on `test_set` after
/// every epoch. Examples are (image batch, class index); `input` turns a batch of images into
/// what the model takes. With c.checkpoint_dir it writes training checkpoints, and with
/// c.resume it first continues from the newest valid one (Note [Exact resumption]). The same
/// loop as examples/train_mlp.cpp's, with autocast and a GradScaler for mixed precision.
inline TrainResult train(nn::Module& model, std::shared_ptr<data::Dataset> train_set,
                         std::shared_ptr<data::Dataset> test_set, const TrainConfig& c,
                         const std::function<Tensor(const Tensor&)>& input) {
  TrainingRun run(model, std::move(train_set), std::move(test_set), c, input);
  if (run.planned_only()) return TrainResult{};
  LoopPosition& at = run.at;
  // One training step; with --compile it is captured once and replayed (compile/compile.h).
  auto step = [&](const Tensor& images, const Tensor& y) {
    const Tensor x = input(images);
    run.optimizer->zero_grad();
    Tensor loss;
    {
      amp::autocast region(c.device.type(), c.mixed_precision);
      loss = cross_entropy(model.forward(x), y);
    }
    run.scaler.scale(loss).backward();
    run.scaler.step(*run.optimizer);
    run.scaler.update();
    return loss;
  };
  auto compiled_step = kiln::compile(step);
  StepProfiler profile(c.profile_dir, c.profile_with_stack);
  for (; at.epoch <= c.epochs; at = at.next_epoch()) {
    Progress progress("epoch " + std::to_string(at.epoch) + (c.compile ? " (compiled)" : ""), run.train_loader->size());
    const std::int64_t samples_before = at.samples;
    data::DataLoader& loader = *run.train_loader;
    for (auto it = run.batches_left() ? loader.begin() : loader.end(); it != loader.end(); ++it) {
      const data::Example& batch = *it;
      const Tensor images = batch.data.to(c.device, true);
      const Tensor y = batch.target.to(c.device, true);
      const Tensor loss = c.compile ? compiled_step(images, y) : step(images, y);
      at.loss_sum += loss.item<double>();
      profile.step();
      ++at.steps;
      ++at.step;
      at.samples += y.numel();
      progress.update(static_cast<std::size_t>(at.steps), at.loss_sum / static_cast<double>(at.steps),
                      static_cast<std::size_t>(at.samples - samples_before));
      run.after_step();
    }
    progress.finish();
    const double seconds = progress.seconds();  // the epoch's training, not its evaluation
    run.schedule->step();
    const double train_loss = at.loss_sum / static_cast<double>(std::max<std::int64_t>(at.steps, 1));
    const auto [accuracy, test_loss] = evaluate(model, *run.test_loader, c.device, input, c.mixed_precision);
    run.end_epoch(train_loss, test_loss, accuracy, seconds, static_cast<double>(at.samples - samples_before));
  }
  if (c.compile) report_compiled(compiled_step);
  profile.finish();
  return run.finish();
}

/// train() on Fashion-MNIST, read from c.data_root. `input` reshapes a batch of
/// [N, 1, 28, 28] images.
inline TrainResult train_fashion_mnist(nn::Module& model, const TrainConfig& c,
                                       const std::function<Tensor(const Tensor&)>& input) {
  return train(model, data::FashionMNIST::load(true, c.data_root), data::FashionMNIST::load(false, c.data_root), c,
               input);
}

/// The whole main() of a program that trains `Model` on Fashion-MNIST: the shared flags with
/// these defaults, the seed, training, all inside the programs' error boundary.
template <class Model>
int train_main(int argc, char** argv, const char* program, const char* summary, TrainConfig config,
               const std::function<Tensor(const Tensor&)>& input) {
  return run_program(program, [&] {
    Flags flags(program, summary);
    add_training_flags(flags, config, TrainingFlags{.export_onnx = true});
    flags.parse(argc, argv);
    manual_seed(config.seed);
    Model model;
    train_fashion_mnist(model, config, input);
    return 0;
  });
}

}  // namespace kiln::examples
