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
#include <deque>
#include <optional>
#include <string>

namespace loom::optim {

class ProgressMeter {
 public:
  // `unit` names what is counted per step in the throughput column ("tok/s", "img/s", ...).
  explicit ProgressMeter(int64_t tokens_per_step, std::string unit = "tok/s");

  double elapsed() const;        // seconds since construction, everything included
  void add(double loss);         // one more training step and its loss
  void exclude(double seconds);  // time since the last line that was not training
  // The line for `step` of `total` at learning rate `lr`; the next line averages anew. A total
  // of 0 is one not known yet (a --minutes run before its plan): "step 20/? | ... | ETA ?".
  std::string line(int64_t step, int64_t total, double lr);

 private:
  std::chrono::steady_clock::time_point start_;
  int64_t tokens_per_step_;
  std::string unit_;
  double window_loss_ = 0, window_start_ = 0;
  int64_t window_steps_ = 0;
};

// TimeBudget: how many steps fill a training time given in minutes (the trainers' --minutes).
// The first plan is bench/reference/train.py's too, so that both sides of a side-by-side
// run start alike: at step 21, the speed of steps 2-21 (the first step carries one-off costs:
// allocations, page faults, thread start-up) extrapolated to the time that is left. A machine's
// speed is not constant, though (a shared one's can halve for minutes, and an evaluation warms
// or cools the caches), so the plan is revised every 20 steps from the speed of the latest 200
// or so, and the run ends within about one such window of its minutes however the speed moves
// (train.py revises alike: bench/reference/time_budget.py). The seconds are those of training:
// evaluations are left out, on both sides.
//
//   optim::TimeBudget budget(o.minutes);            // 0 minutes: no plan, observe() is a no-op
//   ... after each step, with the training seconds so far:
//   if (auto planned = budget.observe(done, seconds)) total = *planned;
class TimeBudget {
 public:
  static constexpr int64_t kFirstPlan = 21;    // the first plan: steps 2..21 timed
  static constexpr int64_t kReviseEvery = 20;  // then a revision every 20 steps,
  static constexpr int64_t kWindow = 200;      // from the speed of the latest 200 steps

  explicit TimeBudget(double minutes);

  bool active() const { return minutes_ > 0; }
  // After step `done` (1-based), `seconds` of training into the run, that step having cost
  // `work` (1 when every step costs the same; for steps of unequal cost, the step's cost in
  // units of the average step's): the planned total when a plan is due (at step 21, then every
  // 20 steps), nothing otherwise. The first plan is at least done + 1; a revision that finds
  // the minutes spent returns `done`: stop now.
  std::optional<int64_t> observe(int64_t done, double seconds, double work = 1);
  // Seconds per (average) step of the latest plan: 0 before the first; over how many steps.
  double seconds_per_step() const { return seconds_per_step_; }
  int64_t window_steps() const { return window_steps_; }

 private:
  struct Mark {
    int64_t done;
    double seconds, work;  // work: the cost of steps 2..done
  };
  double minutes_, work_ = 0, seconds_per_step_ = 0;
  int64_t window_steps_ = 0;
  std::deque<Mark> marks_;  // at step 1, 21, 41, ...: the latest kWindow / kReviseEvery + 1
};

// "45s", "9m04s".
std::string format_duration(double seconds);

}  // namespace loom::optim
