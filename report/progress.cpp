#include "report/progress.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"

namespace loom::optim {

ProgressMeter::ProgressMeter(int64_t tokens_per_step, std::string unit)
    : start_(std::chrono::steady_clock::now()),
      tokens_per_step_(tokens_per_step),
      unit_(std::move(unit)) {
  LOOM_CHECK(tokens_per_step > 0, "ProgressMeter: tokens_per_step {} must be positive",
             tokens_per_step);
}

double ProgressMeter::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressMeter::add(double loss) {
  window_loss_ += loss;
  ++window_steps_;
}

void ProgressMeter::exclude(double seconds) { window_start_ += seconds; }

std::string ProgressMeter::line(int64_t step, int64_t total, double lr) {
  const double now = elapsed(), seconds = now - window_start_;
  const int64_t steps = std::max<int64_t>(window_steps_, 1);
  const double rate = static_cast<double>(window_steps_ * tokens_per_step_) / seconds;
  const double eta = seconds / static_cast<double>(steps) * static_cast<double>(total - step);
  const bool known = total > 0;  // a --minutes run before its plan has no total yet
  std::string text = fmt::format(
      "step {:5d}/{} | loss {:.4f} | lr {:.2e} | {:6.0f} {} | {} | ETA {}", step,
      known ? std::to_string(total) : "?", window_loss_ / static_cast<double>(steps), lr, rate,
      unit_, format_duration(now), known ? format_duration(eta) : "?");
  window_loss_ = 0, window_steps_ = 0, window_start_ = now;
  return text;
}

TimeBudget::TimeBudget(double minutes) : minutes_(minutes) {
  LOOM_CHECK(std::isfinite(minutes) && minutes >= 0,
             "TimeBudget: minutes must be a finite number >= 0, got {}", minutes);
}

std::optional<int64_t> TimeBudget::observe(int64_t done, double seconds, double work) {
  if (!active()) return std::nullopt;
  LOOM_CHECK(std::isfinite(work) && work >= 0,
             "TimeBudget: the work of step {} must be a finite number >= 0, got {}", done, work);
  if (done > 1) work_ += work;  // step 1's one-off costs stay out of every speed
  const bool due = done == 1 || (done >= kFirstPlan && (done - kFirstPlan) % kReviseEvery == 0);
  if (!due) return std::nullopt;
  marks_.push_back({done, seconds, work_});
  if (marks_.size() > static_cast<size_t>(kWindow / kReviseEvery + 1)) marks_.pop_front();
  if (done == 1) return std::nullopt;
  const Mark& from = marks_.front();
  const double per_work = (seconds - from.seconds) / std::max(work_ - from.work, 1e-9);
  seconds_per_step_ = per_work;  // an average step costs one unit of work
  window_steps_ = done - from.done;
  const double left = minutes_ * 60 - seconds;
  const double steps_left = left > 0 ? left / std::max(per_work, 1e-9) : 0.0;
  const auto more = static_cast<int64_t>(std::min(steps_left, 1e12));
  return done == kFirstPlan ? std::max(done + 1, done + more) : done + more;
}

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02d}s", s / 60, s % 60) : fmt::format("{}s", s);
}

}  // namespace loom::optim
