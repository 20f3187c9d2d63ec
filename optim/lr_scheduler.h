// Learning-rate scheduler objects, as torch.optim.lr_scheduler: each one drives the learning
// rates of an optimizer's parameter groups, one step() per epoch (or per iteration, as the
// schedule was planned):
//
//   optim::SGD opt(model.parameters(), 0.1f, 0.9f);
//   optim::CosineAnnealingLR sched(opt, /*T_max=*/epochs);
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     train_one_epoch(model, opt);            // opt.step() inside, at sched.get_last_lr()
//     sched.step();
//   }
//
// Construction is PyTorch's: every group's "initial_lr" is set to its current lr unless a
// scheduler set it before (Optimizer::initial_lr), base_lrs are the initial lrs, and the
// schedule's value at step 0 is written into the optimizer at once (last_epoch() == 0).
// Each step() adds one to last_epoch() and sets every group's lr from get_lr(), which follows
// PyTorch 1.13's get_lr() formula by formula -- the recursive forms included (StepLR multiplies
// the group's current lr by gamma, CosineAnnealingLR's recurrence) -- in double, so the
// sequence matches torch's to the last bits. The "current lr" of a group is the double this
// scheduler set last, unless someone changed the group's (float) lr since: then that one.
//
// The pure functions of optim/schedule.h (noam_lr, warmup_cosine_lr, warmup_linear_lr) remain
// the other way to schedule: compute the lr of a step and call Optimizer::set_lr.
//
// State: state_dict() holds last_epoch, base_lrs, last_lrs and each scheduler's counters as
// named lists of numbers; load_state_dict() restores them (and writes last_lrs into the
// optimizer) after checking the scheduler's kind and the number of groups.
// nn::save_checkpoint / load_checkpoint store it beside the optimizer (io/checkpoint.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace loom::optim {

// A scheduler's progress: name -> numbers ("last_epoch" -> {3}, "base_lrs" -> {0.1, 0.01}).
// Counts are stored as doubles too (exact up to 2^53).
using SchedulerState = std::map<std::string, std::vector<double>>;

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;  // would drive the optimizer twice
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances the schedule by one: last_epoch() += 1, then every group's lr = get_lr().
  virtual void step();
  // The lr of every group as this scheduler last set it (in double, as PyTorch returns them).
  std::vector<double> get_last_lr() const { return last_lr_; }
  // Steps taken since construction (0 right after it); PyTorch's `last_epoch`.
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  const std::string& name() const { return name_; }
  Optimizer& optimizer() const { return optimizer_; }

  // The progress (see SchedulerState); subclasses add their counters.
  virtual SchedulerState state_dict() const;
  // Restores a state_dict() of a scheduler of the same kind over an optimizer with as many
  // groups, and sets those groups' lrs to its last lrs (what the optimizer's own state holds
  // too). A missing, malformed or unexpected entry is a loom::Error naming it, raised before
  // anything changes.
  virtual void load_state_dict(const SchedulerState& state);

 protected:
  // `name` prefixes every error message. Sets the groups' initial_lr as PyTorch does (unless
  // set_initial_lr is false: OneCycleLR sets its own) and base_lrs from them.
  LRScheduler(std::string name, Optimizer& optimizer, bool set_initial_lr = true);
  // PyTorch's _initial_step, called at the end of each subclass constructor: a step to 0.
  void initial_step() { LRScheduler::step(); }
  // The lrs at last_epoch() (already advanced), one per group.
  virtual std::vector<double> get_lr() = 0;
  // The group's lr as the recursive forms read it: the double this scheduler set last, or the
  // optimizer's value when it was changed since (Optimizer::set_lr by the user).
  double group_lr(size_t group) const;
  // Every group's current lr (group_lr) times `factor`: the recursive decays.
  std::vector<double> scaled_lrs(double factor) const;
  // Writes `lrs` into the optimizer's groups and last_lr_.
  void apply(const std::vector<double>& lrs);
  size_t num_groups() const { return optimizer_.param_groups().size(); }

  // For subclasses' state: counters they add under their own names. Each reads the entry of
  // `state` or throws naming it; call them all before changing anything.
  double read_number(const SchedulerState& state, const std::string& key) const;
  std::vector<double> read_list(const SchedulerState& state, const std::string& key,
                                size_t size) const;
  // The keys load_state_dict accepts besides the base ones (for the unexpected-entry check).
  virtual std::vector<std::string> extra_keys() const { return {}; }

  std::vector<double> base_lrs_;

 private:
  std::string name_;
  Optimizer& optimizer_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
};

// Decays every group's lr by gamma every step_size steps:
//   lr = base_lr * gamma^floor(last_epoch / step_size)   (computed recursively, as PyTorch)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t step_size_;
  double gamma_;
};

// Decays every group's lr by gamma at each milestone (strictly increasing step numbers):
//   lr = base_lr * gamma^(number of milestones <= last_epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// Half a cosine from base_lr down to eta_min over T_max steps (Loshchilov & Hutter 2017, SGDR
// without restarts), as the recurrence of PyTorch's get_lr:
//   lr_t = eta_min + (lr_{t-1} - eta_min) * (1 + cos(pi t / T_max)) / (1 + cos(pi (t-1) / T_max))
// whose closed form is eta_min + (base_lr - eta_min) * (1 + cos(pi t / T_max)) / 2; past T_max
// it rises again, a cosine of period 2 T_max.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 protected:
  std::vector<double> get_lr() override;

 private:
  int64_t T_max_;
  double eta_min_;
};

// lr = base_lr * lr_lambda(last_epoch): one function for every group, or one per group.
// The functions are not part of the state (as in PyTorch): rebuild the same ones on resume.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas);

 protected:
  std::vector<double> get_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

// The 1cycle policy (Smith & Topin 2018, "Super-Convergence"), as torch's OneCycleLR with
// cycle_momentum=False: the lr rises from max_lr / div_factor to max_lr over the first
// pct_start of total_steps, then anneals to max_lr / div_factor / final_div_factor at step
// total_steps - 1 ("cos" or "linear" annealing). three_phase: up, back down to the initial lr
// symmetrically, then to the minimum. Stepping past total_steps is a loom::Error, as in
// PyTorch. loom cycles the learning rate only: the momentum (SGD) or beta1 (Adam) stays as
// constructed, where PyTorch's default also cycles it between 0.95 and 0.85.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             const std::string& anneal_strategy = "cos", double div_factor = 25.0,
             double final_div_factor = 1e4, bool three_phase = false);
  // One max_lr per group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
             double pct_start = 0.3, const std::string& anneal_strategy = "cos",
             double div_factor = 25.0, double final_div_factor = 1e4, bool three_phase = false);

 protected:
  std::vector<double> get_lr() override;

 private:
  // One phase: from the lr `start` (a multiple of the group's lrs) to `end` at step end_step.
  enum class Level { Initial, Max, Min };
  struct Phase {
    double end_step;
    Level start, end;
  };
  double level_lr(size_t group, Level level) const;

  int64_t total_steps_;
  bool cosine_;
  std::vector<double> max_lrs_, min_lrs_;
  std::vector<Phase> phases_;
};

// Reduces every group's lr by `factor` when a metric has stopped improving for more than
// `patience` steps, as torch's ReduceLROnPlateau: call step(metric) after each evaluation.
//   mode "min" (a loss) or "max" (an accuracy); improving means, against the best so far,
//   rel: metric < best * (1 - threshold) (min) or > best * (1 + threshold) (max);
//   abs: metric < best - threshold       (min) or > best + threshold       (max).
// After a reduction, `cooldown` steps pass before bad steps count again; an lr never goes
// below min_lr, and a reduction smaller than eps is not made.
class ReduceLROnPlateau : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, const std::string& mode = "min",
                             double factor = 0.1, int64_t patience = 10, double threshold = 1e-4,
                             const std::string& threshold_mode = "rel", int64_t cooldown = 0,
                             double min_lr = 0.0, double eps = 1e-8);

  void step(double metric);
  // A loom::Error: this scheduler needs the metric.
  void step() override;

  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

  SchedulerState state_dict() const override;
  void load_state_dict(const SchedulerState& state) override;

 protected:
  std::vector<double> get_lr() override;  // the groups' lrs, unchanged
  std::vector<std::string> extra_keys() const override;

 private:
  bool is_better(double metric) const;

  bool maximize_, relative_;
  double factor_, threshold_, min_lr_, eps_;
  int64_t patience_, cooldown_;
  double best_;
  int64_t num_bad_epochs_ = 0, cooldown_counter_ = 0;
  bool reducing_ = false;  // inside step(metric): get_lr() reduces
};

}  // namespace loom::optim
