// optim/lr_scheduler.cpp — the schedules (see optim/lr_scheduler.h).
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/capture_hooks.h"
#include "core/creation.h"
#include "optim/adam.h"
#include "optim/sgd.h"

namespace kiln::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer.param_groups()) base_lrs_.push_back(g.options->lr);
}

void LRScheduler::step() {
  // Host numbers the optimizer's kernels take: a captured step that steps its schedule steps it
  // again at each replay (Note [Capturing a step]).
  capture::Region region("LRScheduler.step", [this] { step(); });
  ++last_epoch_;
  auto& groups = optimizer_.param_groups();
  for (std::size_t g = 0; g < groups.size(); ++g) groups[g].options->lr = lr_at(g, last_epoch_);
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.options->lr);
  return out;
}

namespace {

const Tensor& entry(const StateDict& dict, const std::string& name, const char* who) {
  const Tensor* t = dict.find(name);
  KILN_CHECK_VALUE(t != nullptr, who, ".load_state_dict: the state dict is missing '", name, "'");
  return *t;
}

std::vector<double> doubles(const Tensor& t) {
  const Tensor v = t.to(kCPU, kFloat64).contiguous();
  const auto* p = v.data_ptr<double>();
  return {p, p + v.numel()};
}

}  // namespace

StateDict LRScheduler::state_dict() const {
  return {{"last_epoch", tensor(last_epoch_)},
          {"base_lrs", tensor(std::span<const double>(base_lrs_), kFloat64)},
          {"_last_lr", tensor(std::span<const double>(get_last_lr()), kFloat64)}};
}

void LRScheduler::load_state_dict(const StateDict& dict) {
  const std::vector<double> base = doubles(entry(dict, "base_lrs", "LRScheduler"));
  KILN_CHECK_VALUE(base.size() == base_lrs_.size(), "LRScheduler.load_state_dict: the state has base_lrs for ",
                   base.size(), " parameter groups but the optimizer has ", base_lrs_.size());
  const std::int64_t last_epoch = entry(dict, "last_epoch", "LRScheduler").item<std::int64_t>();
  entry(dict, "_last_lr", "LRScheduler");
  for (const auto& [key, value] : dict) {
    KILN_CHECK_VALUE(key == "last_epoch" || key == "base_lrs" || key == "_last_lr",
                     "LRScheduler.load_state_dict: unexpected key '", key, "'");
  }
  base_lrs_ = base;
  last_epoch_ = last_epoch;
}

StepLR::StepLR(Optimizer& o, std::int64_t step_size, double gamma) : LRScheduler(o), step_size_(step_size), gamma_(gamma) {
  KILN_CHECK_VALUE(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initialize();
}
double StepLR::lr_at(std::size_t g, std::int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

MultiStepLR::MultiStepLR(Optimizer& o, std::vector<std::int64_t> milestones, double gamma)
    : LRScheduler(o), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initialize();
}
double MultiStepLR::lr_at(std::size_t g, std::int64_t epoch) const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& o, double gamma) : LRScheduler(o), gamma_(gamma) { initialize(); }
double ExponentialLR::lr_at(std::size_t g, std::int64_t epoch) const {
  return base_lrs_[g] * std::pow(gamma_, static_cast<double>(epoch));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, std::int64_t t_max, double eta_min)
    : LRScheduler(o), t_max_(t_max), eta_min_(eta_min) {
  KILN_CHECK_VALUE(t_max > 0, "CosineAnnealingLR: T_max must be positive, got ", t_max);
  initialize();
}
double CosineAnnealingLR::lr_at(std::size_t g, std::int64_t epoch) const {
  return eta_min_ + (base_lrs_[g] - eta_min_) *
                        (1 + std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& o, double start_factor, double end_factor, std::int64_t total_iters)
    : LRScheduler(o), start_(start_factor), end_(end_factor), total_(total_iters) {
  KILN_CHECK_VALUE(start_factor > 0 && start_factor <= 1, "Starting multiplicative factor expected to be greater "
                   "than 0 and less or equal to 1.");
  KILN_CHECK_VALUE(end_factor >= 0 && end_factor <= 1, "Ending multiplicative factor expected to be between 0 and 1.");
  initialize();
}
double LinearLR::lr_at(std::size_t g, std::int64_t epoch) const {
  const double progress = total_ == 0 ? 1.0 : static_cast<double>(std::min(epoch, total_)) / static_cast<double>(total_);
  return base_lrs_[g] * (start_ + (end_ - start_) * progress);
}

OneCycleLR::OneCycleLR(Optimizer& o, double max_lr, std::int64_t total_steps, OneCycleLROptions opts)
    : LRScheduler(o), total_steps_(total_steps), options_(opts), max_lr_(max_lr) {
  KILN_CHECK_VALUE(total_steps > 0, "Expected positive integer total_steps, but got ", total_steps);
  KILN_CHECK_VALUE(opts.pct_start >= 0 && opts.pct_start <= 1, "Expected float between 0 and 1 pct_start, but got ",
                   opts.pct_start);
  const double initial = 1.0 / opts.div_factor;             // as fractions of max_lr
  const double min_lr = initial / opts.final_div_factor;
  const double up = opts.pct_start * static_cast<double>(total_steps) - 1;
  const double last = static_cast<double>(total_steps) - 1;
  if (opts.three_phase) {
    phases_ = {{up, initial, 1.0, opts.max_momentum, opts.base_momentum},
               {2 * opts.pct_start * static_cast<double>(total_steps) - 2, 1.0, initial, opts.base_momentum, opts.max_momentum},
               {last, initial, min_lr, opts.max_momentum, opts.max_momentum}};
  } else {
    phases_ = {{up, initial, 1.0, opts.max_momentum, opts.base_momentum},
               {last, 1.0, min_lr, opts.base_momentum, opts.max_momentum}};
  }
  for (auto& g : o.param_groups()) g.options->lr = max_lr * initial;
  initialize();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (options_.cos_anneal) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  return (end - start) * pct + start;
}

double OneCycleLR::lr_at(std::size_t, std::int64_t step) const {
  KILN_CHECK_VALUE(step <= total_steps_, "Tried to step ", step, " times. The specified number of total steps is ",
                   total_steps_);
  double start_step = 0;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    if (static_cast<double>(step) <= p.end_step || i + 1 == phases_.size()) {
      const double pct = (static_cast<double>(step) - start_step) / (p.end_step - start_step);
      set_momentum(step);
      return max_lr_ * anneal(p.start_lr_factor, p.end_lr_factor, pct);
    }
    start_step = p.end_step;
  }
  return max_lr_;
}

void OneCycleLR::set_momentum(std::int64_t step) const {
  if (!options_.cycle_momentum) return;
  double start_step = 0;
  double momentum = options_.max_momentum;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    const Phase& p = phases_[i];
    if (static_cast<double>(step) <= p.end_step || i + 1 == phases_.size()) {
      momentum = anneal(p.start_momentum, p.end_momentum, (static_cast<double>(step) - start_step) / (p.end_step - start_step));
      break;
    }
    start_step = p.end_step;
  }
  for (auto& g : optimizer_.param_groups()) {
    if (auto* sgd = dynamic_cast<SGDOptions*>(g.options.get())) sgd->momentum_ = momentum;
    else if (auto* adam = dynamic_cast<AdamOptions*>(g.options.get())) adam->betas_.first = momentum;
  }
}

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& o, Options opts) : optimizer_(o), options_(opts) {
  KILN_CHECK_VALUE(opts.factor < 1.0, "Factor should be < 1.0.");
  best_ = opts.mode == Mode::Min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

StateDict ReduceLROnPlateau::state_dict() const {
  return {{"best", tensor(best_, kFloat64)},
          {"num_bad_epochs", tensor(num_bad_epochs_)},
          {"cooldown_counter", tensor(cooldown_counter_)},
          {"last_epoch", tensor(last_epoch_)}};
}

void ReduceLROnPlateau::load_state_dict(const StateDict& dict) {
  const char* who = "ReduceLROnPlateau";
  const double best = entry(dict, "best", who).item<double>();
  const std::int64_t bad = entry(dict, "num_bad_epochs", who).item<std::int64_t>();
  const std::int64_t cooldown = entry(dict, "cooldown_counter", who).item<std::int64_t>();
  const std::int64_t last_epoch = entry(dict, "last_epoch", who).item<std::int64_t>();
  KILN_CHECK_VALUE(dict.size() == 4, "ReduceLROnPlateau.load_state_dict: the state dict has ", dict.size(),
                   " entries; expected best, num_bad_epochs, cooldown_counter and last_epoch");
  best_ = best;
  num_bad_epochs_ = bad;
  cooldown_counter_ = cooldown;
  last_epoch_ = last_epoch;
}

bool ReduceLROnPlateau::is_better(double a) const {
  const double t = options_.threshold;
  if (options_.mode == Mode::Min) return options_.relative_threshold ? a < best_ * (1 - t) : a < best_ - t;
  return options_.relative_threshold ? a > best_ * (1 + t) : a > best_ + t;
}

void ReduceLROnPlateau::step(double metric) {
  ++last_epoch_;
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  if (num_bad_epochs_ > options_.patience) {
    for (auto& g : optimizer_.param_groups()) {
      const double old_lr = g.options->lr;
      const double new_lr = std::max(old_lr * options_.factor, options_.min_lr);
      if (old_lr - new_lr > options_.eps) g.options->lr = new_lr;
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
}

std::vector<double> ReduceLROnPlateau::get_last_lr() const {
  std::vector<double> out;
  for (const auto& g : optimizer_.param_groups()) out.push_back(g.options->lr);
  return out;
}

}  // namespace kiln::optim
