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

// "45s", "9m04s".
std::string format_duration(double seconds);

}  // namespace loom::optim
