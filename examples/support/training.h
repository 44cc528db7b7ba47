// examples/support/training.h — what the training programs share: command-line flags, a
// progress line, evaluation, a CSV log, and the epoch loop. Header-only: each example is one
// program, and this is the part they have in common.
// Read next: examples/train_mlp.cpp.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
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
};

/// A progress line that redraws itself on a terminal and prints plain lines otherwise.
class Progress {
 public:
  Progress(std::string label, std::size_t total) : label_(std::move(label)), total_(total), tty_(isatty(1) != 0) {
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
  std::int64_t batch_size = 128;
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
};

inline void add_common_flags(Flags& f, const TrainConfig& defaults) {
  f.add("epochs", std::to_string(defaults.epochs), "passes over the training set");
  f.add("batch-size", std::to_string(defaults.batch_size), "samples per step");
  f.add("lr", std::to_string(defaults.lr), "learning rate (peak of the cosine schedule)");
  f.add("optimizer", defaults.optimizer, "adam, adamw or sgd (momentum 0.9)");
  f.add("seed", std::to_string(defaults.seed), "seed for initialisation and shuffling");
  f.add("workers", std::to_string(defaults.workers), "DataLoader worker threads");
  f.add("device", defaults.device.str(), "cpu or cuda");
  f.add("checkpoint", defaults.checkpoint, "write the trained weights here (safetensors)");
  f.add("log", defaults.log, "write per-epoch loss/accuracy here (CSV, plot with scripts/plot_log.sh)");
  f.add("data", defaults.data_root, "Fashion-MNIST directory");
  f.add("limit", "0", "train on only this many samples (0 = all)");
}

inline TrainConfig config_from(const Flags& f) {
  TrainConfig c;
  c.epochs = f.integer("epochs");
  c.batch_size = f.integer("batch-size");
  c.lr = f.num("lr");
  c.optimizer = f.str("optimizer");
  c.seed = static_cast<std::uint64_t>(f.integer("seed"));
  c.workers = static_cast<std::size_t>(f.integer("workers"));
  c.device = f.device("device");
  c.checkpoint = f.str("checkpoint");
  c.log = f.str("log");
  c.data_root = f.str("data");
  c.limit = f.integer("limit");
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

/// Trains `model` with cross-entropy and a cosine schedule, evaluating on `test_set` after
/// every epoch. Examples are (image batch, class index); `input` turns a batch of images into
/// what the model takes.
inline TrainResult train(nn::Module& model, std::shared_ptr<data::Dataset> train_set,
                         std::shared_ptr<data::Dataset> test_set, const TrainConfig& c,
                         const std::function<Tensor(const Tensor&)>& input) {
  std::shared_ptr<data::Dataset> train = train_set;
  if (c.limit > 0 && static_cast<std::size_t>(c.limit) < train_set->size()) {
    std::vector<std::size_t> first(static_cast<std::size_t>(c.limit));
    for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
    train = std::make_shared<data::Subset>(train_set, first);
  }
  data::DataLoader train_loader(train, {.batch_size = static_cast<std::size_t>(c.batch_size), .shuffle = true,
                                        .seed = c.seed, .num_workers = c.workers, .pin_memory = c.device.is_cuda()});
  data::DataLoader test_loader(test_set, {.batch_size = 1000, .num_workers = c.workers});
  model.to(c.device);
  auto opt = make_optimizer(c, model.parameters());
  optim::CosineAnnealingLR schedule(*opt, c.epochs);
  std::ofstream log;
  if (!c.log.empty()) {
    log.open(c.log);
    log << "epoch,train_loss,test_loss,test_accuracy,seconds,samples_per_second\n";
  }
  std::printf("%s\n%lld parameters, %zu training samples, batch %lld, %s lr %g, %lld epochs on %s\n",
              model.repr().c_str(), static_cast<long long>(model.num_parameters()), train->size(),
              static_cast<long long>(c.batch_size), c.optimizer.c_str(), c.lr, static_cast<long long>(c.epochs),
              c.device.str().c_str());
  // Disabled (a pass-through) unless mixed precision is on; see examples/amp_train.cpp.
  amp::GradScaler scaler({.enabled = c.mixed_precision});
  TrainResult result;
  double train_seconds = 0.0;
  std::size_t samples_seen = 0;
  for (std::int64_t epoch = 1; epoch <= c.epochs; ++epoch) {
    Progress progress("epoch " + std::to_string(epoch), train_loader.size());
    double loss_sum = 0.0;
    std::size_t steps = 0, samples = 0;
    for (const data::Example& batch : train_loader) {
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
      loss_sum += loss.item<double>();
      ++steps;
      samples += static_cast<std::size_t>(y.numel());
      progress.update(steps, loss_sum / static_cast<double>(steps), samples);
    }
    progress.finish();
    const double seconds = progress.seconds();
    schedule.step();
    train_seconds += seconds;
    samples_seen += samples;
    const auto [accuracy, test_loss] = evaluate(model, test_loader, c.device, input, c.mixed_precision);
    std::printf("epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.2fs (%.0f samples/s)",
                static_cast<long long>(epoch), loss_sum / static_cast<double>(steps), test_loss, 100 * accuracy,
                seconds, static_cast<double>(samples) / seconds);
    if (c.mixed_precision) std::printf(", loss scale %g", scaler.get_scale());
    std::printf("\n");
    if (log.is_open()) {
      log << epoch << "," << loss_sum / static_cast<double>(steps) << "," << test_loss << "," << accuracy << ","
          << seconds << "," << static_cast<double>(samples) / seconds << "\n" << std::flush;
    }
    result.test_accuracy = accuracy;
    result.train_losses.push_back(loss_sum / static_cast<double>(steps));
  }
  result.seconds_per_epoch = train_seconds / static_cast<double>(c.epochs);
  result.samples_per_second = static_cast<double>(samples_seen) / train_seconds;
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
