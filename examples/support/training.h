// examples/support/training.h — what the training programs share: command-line flags, a
// progress line, evaluation, a CSV log, and the epoch loop. Header-only: each example is one
// program, and this is the part they have in common.
// Read next: examples/train_mlp.cpp.
#pragma once

#include <unistd.h>

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

#include "kiln.h"

namespace kiln::examples {

/// --name value flags with defaults and --help.
class Flags {
 public:
  Flags(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}
  void add(const std::string& name, const std::string& default_value, const std::string& help) {
    order_.push_back(name);
    values_[name] = default_value;
    help_[name] = help;
  }
  /// A flag without a value: present means on (--resume), or --name=0/1.
  void add_switch(const std::string& name, const std::string& help) {
    add(name, "0", help);
    switches_.insert(name);
  }
  /// Parses argv; prints usage and exits on --help or an unknown flag.
  void parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") usage(0);
      if (arg.rfind("--", 0) != 0) usage(2, "unexpected argument '" + arg + "'");
      arg = arg.substr(2);
      std::string value;
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      } else if (switches_.count(arg)) {
        value = "1";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        usage(2, "flag --" + arg + " needs a value");
      }
      if (!values_.count(arg)) usage(2, "unknown flag --" + arg);
      values_[arg] = value;
    }
  }
  std::string str(const std::string& name) const { return values_.at(name); }
  bool on(const std::string& name) const { return integer(name) != 0; }
  double num(const std::string& name) const {
    return convert(name, [](const std::string& v) { return std::stod(v); });
  }
  std::int64_t integer(const std::string& name) const {
    return convert(name, [](const std::string& v) { return static_cast<std::int64_t>(std::stoll(v)); });
  }
  Device device(const std::string& name) const {
    return convert(name, [](const std::string& v) { return Device(v); });
  }

 private:
  /// The value of flag `name` through `parse`; a value it rejects is a usage error, not a crash.
  template <class Parse>
  std::invoke_result_t<Parse, const std::string&> convert(const std::string& name, const Parse& parse) const {
    const std::string& value = values_.at(name);
    try {
      return parse(value);
    } catch (const std::exception&) {
      usage(2, "invalid value '" + value + "' for --" + name);
    }
  }

  [[noreturn]] void usage(int code, const std::string& error = "") const {
    if (!error.empty()) std::fprintf(stderr, "%s: %s\n\n", program_.c_str(), error.c_str());
    std::printf("%s — %s\n\nflags:\n", program_.c_str(), summary_.c_str());
    for (const std::string& n : order_) {
      std::printf("  --%-14s %s (default: %s)\n", n.c_str(), help_.at(n).c_str(), values_.at(n).c_str());
    }
    std::exit(code);
  }
  std::string program_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_, help_;
  std::set<std::string> switches_;
};

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
  std::string log;         // CSV path ("" = none)
  std::string data_root = data::default_fashion_mnist_root();
  std::int64_t limit = 0;  // use only this many training samples (0 = all), for quick runs
  bool mixed_precision = false;  // autocast (CUDA Float16 / CPU BFloat16) + GradScaler
  std::string checkpoint_dir;            // training checkpoints go here ("" = none)
  std::int64_t checkpoint_every = 0;     // steps between checkpoints (0 = at each epoch's end)
  std::size_t keep_checkpoints = 3;      // the newest this many are kept
  bool resume = false;                   // continue from checkpoint_dir's newest valid checkpoint
  int threads = 0;                       // CPU threads (0: adaptive, fixed when checkpointing)
  // Where tests kill a run: after each step (the global step count), after each epoch's end
  // (its checkpoint written), and inside a checkpoint write (CheckpointDirOptions).
  std::function<void(std::int64_t step)> after_step{};
  std::function<void(std::int64_t epoch)> after_epoch{};
  std::function<void(const std::string& unpublished_path)> before_checkpoint_publish{};
};

inline void add_common_flags(Flags& f, const TrainConfig& defaults) {
  f.add("epochs", std::to_string(defaults.epochs), "passes over the training set");
  f.add("batch-size", std::to_string(defaults.batch_size),
        "samples per step, or auto: the largest batch whose planned step fits the device's free memory");
  f.add_switch("plan", "print the memory plan of one training step (kiln::memory::plan) and exit");
  f.add("lr", std::to_string(defaults.lr), "learning rate (peak of the cosine schedule)");
  f.add("optimizer", defaults.optimizer, "adam, adamw or sgd (momentum 0.9)");
  f.add("seed", std::to_string(defaults.seed), "seed for initialisation and shuffling");
  f.add("workers", std::to_string(defaults.workers), "DataLoader worker threads");
  f.add("device", defaults.device.str(), "cpu or cuda");
  f.add("checkpoint", defaults.checkpoint, "write the trained weights here (safetensors)");
  f.add("log", defaults.log, "write per-epoch loss/accuracy here (CSV, plot with scripts/plot_log.sh)");
  f.add("data", defaults.data_root, "Fashion-MNIST directory");
  f.add("limit", "0", "train on only this many samples (0 = all)");
  f.add("checkpoint-dir", defaults.checkpoint_dir, "write training checkpoints (model, optimizer, schedule, data "
        "position, RNG) into this folder");
  f.add("checkpoint-every", std::to_string(defaults.checkpoint_every), "steps between checkpoints (0 = each epoch)");
  f.add("keep-checkpoints", std::to_string(defaults.keep_checkpoints), "how many of the newest checkpoints to keep");
  f.add_switch("resume", "continue from the newest valid checkpoint in --checkpoint-dir");
  f.add("threads", "0", "CPU threads (0 = all cores, backing off when the machine is busy; fixed when "
        "checkpointing)");
}

inline TrainConfig config_from(const Flags& f) {
  TrainConfig c;
  c.epochs = f.integer("epochs");
  c.batch_size = f.str("batch-size") == "auto" ? 0 : f.integer("batch-size");
  if (c.batch_size < 0) throw std::invalid_argument("--batch-size must be positive or auto");
  c.plan = f.on("plan");
  c.lr = f.num("lr");
  c.optimizer = f.str("optimizer");
  c.seed = static_cast<std::uint64_t>(f.integer("seed"));
  c.workers = static_cast<std::size_t>(f.integer("workers"));
  c.device = f.device("device");
  c.checkpoint = f.str("checkpoint");
  c.log = f.str("log");
  c.data_root = f.str("data");
  c.limit = f.integer("limit");
  c.checkpoint_dir = f.str("checkpoint-dir");
  c.checkpoint_every = f.integer("checkpoint-every");
  c.keep_checkpoints = static_cast<std::size_t>(f.integer("keep-checkpoints"));
  c.resume = f.on("resume");
  c.threads = static_cast<int>(f.integer("threads"));
  return c;
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
    LoopPosition p;
    p.epoch = std::stoll(get("epoch"));
    p.epoch_done = get("epoch_done") == "1";
    p.step = std::stoll(get("step"));
    p.loss_sum = std::stod(get("loss_sum"));
    p.steps = std::stoll(get("steps"));
    p.samples = std::stoll(get("samples"));
    p.test_accuracy = std::stod(get("test_accuracy"));
    std::istringstream losses(get("train_losses"));
    for (std::string l; losses >> l;) p.train_losses.push_back(std::stod(l));
    return p;
  }
};

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

/// Trains `model` with cross-entropy and a cosine schedule, evaluating on `test_set` after
/// every epoch. Examples are (image batch, class index); `input` turns a batch of images into
/// what the model takes. With c.checkpoint_dir it writes training checkpoints, and with
/// c.resume it first continues from the newest valid one (Note [Exact resumption]).
inline TrainResult train(nn::Module& model, std::shared_ptr<data::Dataset> train_set,
                         std::shared_ptr<data::Dataset> test_set, const TrainConfig& c,
                         const std::function<Tensor(const Tensor&)>& input) {
  std::shared_ptr<data::Dataset> train = train_set;
  if (c.limit > 0 && static_cast<std::size_t>(c.limit) < train_set->size()) {
    std::vector<std::size_t> first(static_cast<std::size_t>(c.limit));
    for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
    train = std::make_shared<data::Subset>(train_set, first);
  }
  std::int64_t batch_size = c.batch_size;
  if (batch_size == 0 || c.plan) {
    if (const auto planned = plan_memory(model, *train, c, input, batch_size); planned) return *planned;
  }
  data::DataLoader train_loader(train, {.batch_size = static_cast<std::size_t>(batch_size), .shuffle = true,
                                        .seed = c.seed, .num_workers = c.workers, .pin_memory = c.device.is_cuda()});
  data::DataLoader test_loader(test_set, {.batch_size = 1000, .num_workers = c.workers});
  model.to(c.device);
  auto opt = make_optimizer(c, model.parameters());
  optim::CosineAnnealingLR schedule(*opt, c.epochs);
  // Disabled (a pass-through) unless mixed precision is on; see examples/amp_train.cpp.
  amp::GradScaler scaler({.enabled = c.mixed_precision});

  if (c.resume && c.checkpoint_dir.empty()) throw std::invalid_argument("--resume needs --checkpoint-dir");
  std::optional<checkpoint::CheckpointDir> checkpoints;
  if (!c.checkpoint_dir.empty()) {
    checkpoints.emplace(c.checkpoint_dir, checkpoint::CheckpointDirOptions{
                                              .keep_last = c.keep_checkpoints,
                                              .before_publish = c.before_checkpoint_publish});
  }
  // Bit-identical resumption needs the same thread count before and after the kill: oneDNN's
  // last bits depend on it, and the adaptive count backs off when the machine is busy.
  if (c.threads > 0) {
    set_num_threads(c.threads);
  } else if (checkpoints) {
    set_num_threads(get_num_threads());
    std::printf("checkpointing: CPU threads fixed at %d, so a resumed run computes the same bits (--threads to "
                "choose)\n", get_num_threads());
  }
  checkpoint::TrainingState state{.model = &model, .optimizer = opt.get(), .scheduler = &schedule,
                                  .scaler = &scaler, .loader = &train_loader};
  LoopPosition at;
  bool resumed = false;
  if (c.resume) {
    if (const auto path = checkpoints->resume(state)) {
      at = LoopPosition::from(state.values);
      resumed = true;
      std::printf("resumed from %s: epoch %lld%s, step %lld\n", path->c_str(), static_cast<long long>(at.epoch),
                  at.epoch_done ? " done" : "", static_cast<long long>(at.step));
      if (at.epoch_done) at = {.epoch = at.epoch + 1, .step = at.step, .train_losses = at.train_losses,
                               .test_accuracy = at.test_accuracy};
    } else {
      std::printf("no valid checkpoint in %s: starting fresh\n", c.checkpoint_dir.c_str());
    }
  }
  auto save_checkpoint = [&] {
    state.values = at.values();
    checkpoints->save(at.step, state);
  };

  std::ofstream log;
  if (!c.log.empty()) {
    const bool append = resumed && std::filesystem::exists(c.log);
    log.open(c.log, append ? std::ios::app : std::ios::trunc);
    if (!append) log << "epoch,train_loss,test_loss,test_accuracy,seconds,samples_per_second\n";
  }
  std::printf("%s\n%lld parameters, %zu training samples, batch %lld, %s lr %g, %lld epochs on %s\n",
              model.repr().c_str(), static_cast<long long>(model.num_parameters()), train->size(),
              static_cast<long long>(batch_size), c.optimizer.c_str(), c.lr, static_cast<long long>(c.epochs),
              c.device.str().c_str());
  TrainResult result;
  double train_seconds = 0.0;
  std::size_t samples_seen = 0;
  std::int64_t epochs_run = 0;
  for (; at.epoch <= c.epochs; at = {.epoch = at.epoch + 1, .step = at.step, .train_losses = at.train_losses,
                                     .test_accuracy = at.test_accuracy}) {
    Progress progress("epoch " + std::to_string(at.epoch), train_loader.size());
    // A run resumed from a checkpoint taken after an epoch's last step has that epoch's
    // batches behind it already: the loader would start the next epoch's.
    const bool batches_left = at.steps < static_cast<std::int64_t>(train_loader.size());
    const std::int64_t samples_before = at.samples;
    for (auto it = batches_left ? train_loader.begin() : train_loader.end(); it != train_loader.end(); ++it) {
      const data::Example& batch = *it;
      const Tensor x = input(batch.data.to(c.device, true));
      const Tensor y = batch.target.to(c.device, true);
      opt->zero_grad();
      Tensor loss;
      {
        amp::autocast region(c.device.type(), c.mixed_precision);
        loss = cross_entropy(model.forward(x), y);
      }
      scaler.scale(loss).backward();
      scaler.step(*opt);
      scaler.update();
      at.loss_sum += loss.item<double>();
      ++at.steps;
      ++at.step;
      at.samples += y.numel();
      progress.update(static_cast<std::size_t>(at.steps), at.loss_sum / static_cast<double>(at.steps),
                      static_cast<std::size_t>(at.samples - samples_before));
      if (checkpoints && c.checkpoint_every > 0 && at.step % c.checkpoint_every == 0) save_checkpoint();
      if (c.after_step) c.after_step(at.step);
    }
    progress.finish();
    const double seconds = progress.seconds();
    const double samples = static_cast<double>(at.samples - samples_before);
    schedule.step();
    train_seconds += seconds;
    samples_seen += static_cast<std::size_t>(samples);
    ++epochs_run;
    const double train_loss = at.loss_sum / static_cast<double>(std::max<std::int64_t>(at.steps, 1));
    const auto [accuracy, test_loss] = evaluate(model, test_loader, c.device, input, c.mixed_precision);
    std::printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.2fs (%.0f samples/s)",
                static_cast<long long>(at.epoch), train_loss, test_loss, 100 * accuracy, seconds, samples / seconds);
    if (c.mixed_precision) std::printf(", loss scale %g", scaler.get_scale());
    std::printf("\n");
    if (log.is_open()) {
      log << at.epoch << "," << train_loss << "," << test_loss << "," << accuracy << "," << seconds << ","
          << samples / seconds << "\n" << std::flush;
    }
    at.test_accuracy = accuracy;
    at.train_losses.push_back(train_loss);
    at.epoch_done = true;
    // Each epoch's end when no step interval is set; and always the very end of training, so
    // the folder's newest checkpoint is the finished run.
    // (A step-interval checkpoint of this same step is replaced: same name, epoch now done.)
    if (checkpoints && (c.checkpoint_every == 0 || at.epoch == c.epochs)) save_checkpoint();
    if (c.after_epoch) c.after_epoch(at.epoch);
  }
  result.test_accuracy = at.test_accuracy;
  result.train_losses = at.train_losses;
  result.seconds_per_epoch = epochs_run > 0 ? train_seconds / static_cast<double>(epochs_run) : 0.0;
  result.samples_per_second = train_seconds > 0 ? static_cast<double>(samples_seen) / train_seconds : 0.0;
  if (!c.checkpoint.empty()) {
    save(c.checkpoint, model.state_dict(), {{"format", "pt"}, {"model", model.type_name()}});
    std::printf("checkpoint written to %s\n", c.checkpoint.c_str());
  }
  std::printf("final test accuracy %.2f%% (%.2fs per epoch)\n", 100 * result.test_accuracy, result.seconds_per_epoch);
  return result;
}

/// train() on Fashion-MNIST, read from c.data_root. `input` reshapes a batch of
/// [N, 1, 28, 28] images.
inline TrainResult train_fashion_mnist(nn::Module& model, const TrainConfig& c,
                                       const std::function<Tensor(const Tensor&)>& input) {
  return train(model, data::FashionMNIST::load(true, c.data_root), data::FashionMNIST::load(false, c.data_root), c,
               input);
}

/// Runs the body of an example's main(): a Kiln error, or a bad flag value met while running
/// (--optimizer, --device), is reported as "program: message" with exit code 1.
template <class Body>
int run_reporting_errors(const char* program, Body body) {
  try {
    return body();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.message().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  }
  return 1;
}

/// The whole main() of a program that trains `Model` on Fashion-MNIST: the common flags with
/// these defaults, the seed, training, and a failure reported as "program: message".
template <class Model>
int train_main(int argc, char** argv, const char* program, const char* summary, const TrainConfig& defaults,
               const std::function<Tensor(const Tensor&)>& input) {
  Flags flags(program, summary);
  add_common_flags(flags, defaults);
  flags.parse(argc, argv);
  const TrainConfig config = config_from(flags);
  manual_seed(config.seed);
  Model model;
  return run_reporting_errors(program, [&] {
    train_fashion_mnist(model, config, input);
    return 0;
  });
}

}  // namespace kiln::examples
