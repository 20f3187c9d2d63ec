#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "core/error.h"

namespace loom::optim {

namespace {

// The product x * y rounded to a double on its own. Built with -march=native, the compiler may
// fuse a product and the sum that follows it into one fma instruction, rounding once where
// Python rounds twice; the schedules would then drift from PyTorch's in the last bits, and a
// phase boundary of OneCycleLR such as 0.1 * 10 - 1 would no longer be exactly 0. Reading the
// product back from a volatile stops the fusion.
double product(double x, double y) {
  const volatile double p = x * y;
  return p;
}

// Steps and counts in a state are stored as doubles: whole numbers up to 2^53 are exact.
bool is_count(double x) { return x >= 0.0 && x <= 9007199254740992.0 && std::floor(x) == x; }

}  // namespace

// ------------------------------------------------------------------------------ LRScheduler

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, bool set_initial_lr)
    : name_(std::move(name)), optimizer_(optimizer) {
  for (size_t g = 0; g < num_groups(); ++g) {
    const double lr = optimizer.param_groups()[g].lr;
    last_lr_.push_back(lr);
    if (!set_initial_lr) continue;
    // group.setdefault("initial_lr", group["lr"]): a second scheduler over the same optimizer
    // starts from where the first one started, not from the lr the first one has set since.
    if (!optimizer.initial_lr(g)) optimizer.set_initial_lr(g, lr);
    base_lrs_.push_back(*optimizer.initial_lr(g));
  }
}

void LRScheduler::step() {
  ++last_epoch_;
  apply(get_lr());
}

double LRScheduler::group_lr(size_t group) const {
  const float lr = optimizer_.param_groups()[group].lr;
  return static_cast<float>(last_lr_[group]) == lr ? last_lr_[group] : static_cast<double>(lr);
}

std::vector<double> LRScheduler::scaled_lrs(double factor) const {
  std::vector<double> lrs;
  for (size_t g = 0; g < num_groups(); ++g) lrs.push_back(group_lr(g) * factor);
  return lrs;
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  for (size_t g = 0; g < lrs.size(); ++g) {
    LOOM_CHECK(std::isfinite(lrs[g]) && lrs[g] >= 0.0,
               "{}: the learning rate {} of param group {} at step {} is not a non-negative "
               "number",
               name_, lrs[g], g, last_epoch_);
    optimizer_.set_lr(g, static_cast<float>(lrs[g]));
  }
  last_lr_ = lrs;
}

SchedulerState LRScheduler::state_dict() const {
  return {{"last_epoch", {static_cast<double>(last_epoch_)}},
          {"base_lrs", base_lrs_},
          {"last_lrs", last_lr_}};
}

double LRScheduler::read_number(const SchedulerState& state, const std::string& key) const {
  return read_list(state, key, 1)[0];
}

std::vector<double> LRScheduler::read_list(const SchedulerState& state, const std::string& key,
                                           size_t size) const {
  const auto it = state.find(key);
  LOOM_CHECK(it != state.end(), "{}: load_state_dict: the state has no entry \"{}\"", name_, key);
  LOOM_CHECK(it->second.size() == size,
             "{}: load_state_dict: entry \"{}\" holds {} numbers, expected {}", name_, key,
             it->second.size(), size);
  return it->second;
}

void LRScheduler::load_state_dict(const SchedulerState& state) {
  const size_t n = num_groups();
  const double last_epoch = read_number(state, "last_epoch");
  LOOM_CHECK(is_count(last_epoch), "{}: load_state_dict: last_epoch {} is not a count", name_,
             last_epoch);
  const std::vector<double> base_lrs = read_list(state, "base_lrs", n);
  const std::vector<double> last_lrs = read_list(state, "last_lrs", n);
  for (size_t g = 0; g < n; ++g)
    LOOM_CHECK(std::isfinite(base_lrs[g]) && base_lrs[g] >= 0.0 && std::isfinite(last_lrs[g]) &&
                   last_lrs[g] >= 0.0,
               "{}: load_state_dict: param group {} has base lr {} and last lr {}; both must be "
               "non-negative",
               name_, g, base_lrs[g], last_lrs[g]);
  std::set<std::string> known = {"last_epoch", "base_lrs", "last_lrs"};
  for (const std::string& key : extra_keys()) known.insert(key);
  for (const auto& [key, values] : state)
    LOOM_CHECK(known.count(key), "{}: load_state_dict: unexpected entry \"{}\"", name_, key);

  last_epoch_ = static_cast<int64_t>(last_epoch);
  base_lrs_ = base_lrs;
  for (size_t g = 0; g < n; ++g) {
    optimizer_.set_initial_lr(g, base_lrs[g]);
    optimizer_.set_lr(g, static_cast<float>(last_lrs[g]));
  }
  last_lr_ = last_lrs;
}

// ----------------------------------------------------------------------- StepLR, MultiStepLR

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler("StepLR", optimizer), step_size_(step_size), gamma_(gamma) {
  LOOM_CHECK(step_size > 0, "StepLR: step_size {} must be positive", step_size);
  LOOM_CHECK(std::isfinite(gamma) && gamma >= 0.0, "StepLR: gamma {} must be non-negative", gamma);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  const bool decay = last_epoch() > 0 && last_epoch() % step_size_ == 0;
  return scaled_lrs(decay ? gamma_ : 1.0);
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler("MultiStepLR", optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  // PyTorch counts repeated milestones (a Counter); loom asks for a plain increasing list.
  for (size_t i = 0; i < milestones_.size(); ++i)
    LOOM_CHECK(milestones_[i] > (i == 0 ? 0 : milestones_[i - 1]),
               "MultiStepLR: milestones must be positive and strictly increasing, got {} at "
               "position {}",
               milestones_[i], i);
  LOOM_CHECK(std::isfinite(gamma) && gamma >= 0.0, "MultiStepLR: gamma {} must be non-negative",
             gamma);
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  const bool decay = std::binary_search(milestones_.begin(), milestones_.end(), last_epoch());
  return scaled_lrs(decay ? gamma_ : 1.0);
}

// -------------------------------------------------------------------------- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler("CosineAnnealingLR", optimizer), T_max_(T_max), eta_min_(eta_min) {
  LOOM_CHECK(T_max > 0, "CosineAnnealingLR: T_max {} must be positive", T_max);
  LOOM_CHECK(std::isfinite(eta_min) && eta_min >= 0.0,
             "CosineAnnealingLR: eta_min {} must be non-negative", eta_min);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  // PyTorch's recurrence, term for term and in its order of operations, so that the doubles
  // agree; its closed form is in the header.
  constexpr double pi = std::numbers::pi;
  const int64_t t = last_epoch();
  const double T = static_cast<double>(T_max_);
  const int64_t period = 2 * T_max_;
  const bool trough = (((t - 1 - T_max_) % period) + period) % period == 0;  // Python's %
  std::vector<double> lrs;
  for (size_t g = 0; g < num_groups(); ++g) {
    const double lr = group_lr(g);
    if (t == 0) {
      lrs.push_back(lr);
    } else if (trough) {  // the step after the minimum: the ratio below would be 0 / 0
      lrs.push_back(lr + (base_lrs_[g] - eta_min_) * (1.0 - std::cos(pi / T)) / 2.0);
    } else {
      const double ratio = (1.0 + std::cos(pi * static_cast<double>(t) / T)) /
                           (1.0 + std::cos(pi * static_cast<double>(t - 1) / T));
      lrs.push_back(product(ratio, lr - eta_min_) + eta_min_);
    }
  }
  return lrs;
}

// ----------------------------------------------------------------------------------- LambdaLR

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda)
    : LambdaLR(optimizer,
               std::vector<Lambda>(optimizer.param_groups().size(), std::move(lr_lambda))) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas)
    : LRScheduler("LambdaLR", optimizer), lambdas_(std::move(lr_lambdas)) {
  LOOM_CHECK(lambdas_.size() == num_groups(),
             "LambdaLR: got {} lr_lambdas for an optimizer with {} param groups", lambdas_.size(),
             num_groups());
  for (size_t g = 0; g < lambdas_.size(); ++g)
    LOOM_CHECK(static_cast<bool>(lambdas_[g]), "LambdaLR: lr_lambda {} is empty", g);
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t g = 0; g < num_groups(); ++g) lrs.push_back(base_lrs_[g] * lambdas_[g](last_epoch()));
  return lrs;
}

// --------------------------------------------------------------------------------- OneCycleLR

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, double div_factor,
                       double final_div_factor, bool three_phase)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr),
                 total_steps, pct_start, anneal_strategy, div_factor, final_div_factor,
                 three_phase) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       double pct_start, const std::string& anneal_strategy, double div_factor,
                       double final_div_factor, bool three_phase)
    : LRScheduler("OneCycleLR", optimizer, /*set_initial_lr=*/false),
      total_steps_(total_steps),
      cosine_(anneal_strategy == "cos"),
      max_lrs_(std::move(max_lrs)) {
  LOOM_CHECK(total_steps > 0, "OneCycleLR: total_steps {} must be positive", total_steps);
  LOOM_CHECK(pct_start >= 0.0 && pct_start <= 1.0, "OneCycleLR: pct_start {} must be in [0, 1]",
             pct_start);
  LOOM_CHECK(anneal_strategy == "cos" || anneal_strategy == "linear",
             "OneCycleLR: anneal_strategy \"{}\" is unknown (expected \"cos\" or \"linear\")",
             anneal_strategy);
  LOOM_CHECK(std::isfinite(div_factor) && div_factor > 0.0 && std::isfinite(final_div_factor) &&
                 final_div_factor > 0.0,
             "OneCycleLR: div_factor {} and final_div_factor {} must be positive", div_factor,
             final_div_factor);
  LOOM_CHECK(max_lrs_.size() == num_groups(),
             "OneCycleLR: got {} max_lr values for an optimizer with {} param groups",
             max_lrs_.size(), num_groups());
  for (size_t g = 0; g < num_groups(); ++g) {
    LOOM_CHECK(std::isfinite(max_lrs_[g]) && max_lrs_[g] >= 0.0,
               "OneCycleLR: max_lr {} of param group {} must be non-negative", max_lrs_[g], g);
    // PyTorch overwrites initial_lr (no setdefault): the cycle defines where the lr starts.
    const double initial = max_lrs_[g] / div_factor;
    optimizer.set_initial_lr(g, initial);
    base_lrs_.push_back(initial);
    min_lrs_.push_back(initial / final_div_factor);
  }
  const double total = static_cast<double>(total_steps);
  const double warmup_end = product(pct_start, total) - 1.0;
  if (three_phase) {
    phases_ = {{warmup_end, Level::Initial, Level::Max},
               {product(2.0 * pct_start, total) - 2.0, Level::Max, Level::Initial},
               {total - 1.0, Level::Initial, Level::Min}};
  } else {
    phases_ = {{warmup_end, Level::Initial, Level::Max}, {total - 1.0, Level::Max, Level::Min}};
  }
  initial_step();
}

double OneCycleLR::level_lr(size_t group, Level level) const {
  switch (level) {
    case Level::Initial:
      return base_lrs_[group];
    case Level::Max:
      return max_lrs_[group];
    case Level::Min:
      return min_lrs_[group];
  }
  return 0.0;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step = last_epoch();
  LOOM_CHECK(step <= total_steps_,
             "OneCycleLR: tried to step {} times; the schedule has total_steps = {}", step,
             total_steps_);
  const double s = static_cast<double>(step);
  // The phase holding `step` (the last one takes everything after it), and where it starts.
  size_t i = 0;
  double start_step = 0.0;
  while (i + 1 < phases_.size() && s > phases_[i].end_step) start_step = phases_[i++].end_step;
  const Phase& phase = phases_[i];
  LOOM_CHECK(phase.end_step != start_step,
             "OneCycleLR: phase {} of the cycle has no steps (pct_start x total_steps = {}); "
             "choose another pct_start",
             i, phase.end_step + 1.0);
  const double pct = (s - start_step) / (phase.end_step - start_step);
  std::vector<double> lrs;
  for (size_t g = 0; g < num_groups(); ++g) {
    const double from = level_lr(g, phase.start), to = level_lr(g, phase.end);
    const double cos_out = std::cos(std::numbers::pi * pct) + 1.0;
    lrs.push_back(cosine_ ? to + product((from - to) / 2.0, cos_out)
                          : product(to - from, pct) + from);
  }
  return lrs;
}

// -------------------------------------------------------------------------- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const std::string& mode, double factor,
                                     int64_t patience, double threshold,
                                     const std::string& threshold_mode, int64_t cooldown,
                                     double min_lr, double eps)
    : LRScheduler("ReduceLROnPlateau", optimizer),
      maximize_(mode == "max"),
      relative_(threshold_mode == "rel"),
      factor_(factor),
      threshold_(threshold),
      min_lr_(min_lr),
      eps_(eps),
      patience_(patience),
      cooldown_(cooldown) {
  LOOM_CHECK(mode == "min" || mode == "max",
             "ReduceLROnPlateau: mode \"{}\" is unknown (expected \"min\" or \"max\")", mode);
  LOOM_CHECK(threshold_mode == "rel" || threshold_mode == "abs",
             "ReduceLROnPlateau: threshold_mode \"{}\" is unknown (expected \"rel\" or \"abs\")",
             threshold_mode);
  LOOM_CHECK(factor >= 0.0 && factor < 1.0, "ReduceLROnPlateau: factor {} must be in [0, 1)",
             factor);
  LOOM_CHECK(patience >= 0 && cooldown >= 0,
             "ReduceLROnPlateau: patience {} and cooldown {} must be non-negative", patience,
             cooldown);
  LOOM_CHECK(std::isfinite(threshold) && threshold >= 0.0 && std::isfinite(min_lr) &&
                 min_lr >= 0.0 && std::isfinite(eps) && eps >= 0.0,
             "ReduceLROnPlateau: threshold {}, min_lr {} and eps {} must be non-negative",
             threshold, min_lr, eps);
  best_ = maximize_ ? -INFINITY : INFINITY;  // PyTorch's mode_worse
  initial_step();
}

bool ReduceLROnPlateau::is_better(double metric) const {
  if (maximize_)
    return relative_ ? metric > best_ * (threshold_ + 1.0) : metric > best_ + threshold_;
  return relative_ ? metric < best_ * (1.0 - threshold_) : metric < best_ - threshold_;
}

void ReduceLROnPlateau::step(double metric) {
  if (is_better(metric)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {  // bad steps right after a reduction do not count
    --cooldown_counter_;
    num_bad_epochs_ = 0;
  }
  reducing_ = num_bad_epochs_ > patience_;
  LRScheduler::step();
  if (reducing_) {
    cooldown_counter_ = cooldown_;
    num_bad_epochs_ = 0;
    reducing_ = false;
  }
}

void ReduceLROnPlateau::step() {
  throw Error(
      "ReduceLROnPlateau: step() needs the metric that decides the reduction; call "
      "step(metric)");
}

std::vector<double> ReduceLROnPlateau::get_lr() {
  std::vector<double> lrs;
  for (size_t g = 0; g < num_groups(); ++g) {
    const double lr = group_lr(g);
    const double reduced = std::max(lr * factor_, min_lr_);
    lrs.push_back(reducing_ && lr - reduced > eps_ ? reduced : lr);
  }
  return lrs;
}

SchedulerState ReduceLROnPlateau::state_dict() const {
  SchedulerState state = LRScheduler::state_dict();
  state["best"] = {best_};
  state["num_bad_epochs"] = {static_cast<double>(num_bad_epochs_)};
  state["cooldown_counter"] = {static_cast<double>(cooldown_counter_)};
  return state;
}

std::vector<std::string> ReduceLROnPlateau::extra_keys() const {
  return {"best", "num_bad_epochs", "cooldown_counter"};
}

void ReduceLROnPlateau::load_state_dict(const SchedulerState& state) {
  const double best = read_number(state, "best");
  const double bad = read_number(state, "num_bad_epochs");
  const double cooldown = read_number(state, "cooldown_counter");
  LOOM_CHECK(!std::isnan(best) && is_count(bad) && is_count(cooldown),
             "ReduceLROnPlateau: load_state_dict: best {}, num_bad_epochs {} and "
             "cooldown_counter {} are not a number and two counts",
             best, bad, cooldown);
  LRScheduler::load_state_dict(state);
  best_ = best;
  num_bad_epochs_ = static_cast<int64_t>(bad);
  cooldown_counter_ = static_cast<int64_t>(cooldown);
}

}  // namespace loom::optim
