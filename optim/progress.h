// ProgressMeter: the progress line of a training loop, as nanoGPT's train.py prints it:
//
//   step    20/1600 | loss 5.5411 | lr 5.00e-04 |   3721 tok/s | 11s | ETA 9m34s
//
// The loss is the mean over the steps since the previous line, tokens/s and the ETA come from
// the time those steps took, so a pause that is not training (an evaluation, a checkpoint)
// can be left out with exclude().
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace loom::optim {

class ProgressMeter {
 public:
  // `unit` names what is counted per step in the throughput column ("tok/s", "img/s", ...).
  explicit ProgressMeter(int64_t tokens_per_step, std::string unit = "tok/s");

  double elapsed() const;     // seconds since construction, everything included
  void add(double loss);      // one more training step and its loss
  void exclude(double seconds);  // time since the last line that was not training
  // The line for `step` of `total` at learning rate `lr`; the next line averages anew.
  std::string line(int64_t step, int64_t total, double lr);

 private:
  std::chrono::steady_clock::time_point start_;
  int64_t tokens_per_step_;
  std::string unit_;
  double window_loss_ = 0, window_start_ = 0;
  int64_t window_steps_ = 0;
};

// TimeBudget: how many steps fill a training time given in minutes (the trainers' --minutes),
// planned as ../shared/bench/torch_train_ref.py plans it, so that both sides of a side-by-side
// run get the same wall clock: the speed of steps 2-21 (the first step carries one-off costs:
// allocations, page faults, thread start-up) extrapolated to the time that is left.
//
//   optim::TimeBudget budget(o.minutes);            // 0 minutes: no plan, observe() is a no-op
//   ... after each step:
//   if (auto planned = budget.observe(done, progress.elapsed())) total = *planned;
class TimeBudget {
 public:
  explicit TimeBudget(double minutes);

  bool active() const { return minutes_ > 0; }
  // After `done` steps, `elapsed` seconds into the run: the planned total, once, at step 21
  // (at least done + 1); nothing before or after.
  std::optional<int64_t> observe(int64_t done, double elapsed);
  double seconds_per_step() const { return seconds_per_step_; }  // 0 until planned

 private:
  double minutes_, t_step1_ = 0, seconds_per_step_ = 0;
};

// "45s", "9m04s".
std::string format_duration(double seconds);

}  // namespace loom::optim
