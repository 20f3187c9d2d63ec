#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace loom::optim {

namespace {

// The checks shared by the warmup schedules.
void check_warmup_args(const char* op, int64_t step, int64_t warmup, int64_t total, float peak) {
  LOOM_CHECK(step >= 0, "{}: step {} must be non-negative", op, step);
  LOOM_CHECK(warmup >= 0 && total >= warmup,
             "{}: need 0 <= warmup <= total, got warmup {} and total {}", op, warmup, total);
  LOOM_CHECK(std::isfinite(peak) && peak > 0.0f, "{}: peak learning rate {} must be positive", op,
             peak);
}

// The linear warmup ramp: 0 at step 0, 1 at step == warmup.
double warmup_fraction(int64_t step, int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(warmup);
}

}  // namespace

float noam_lr(int64_t step, int64_t d_model, int64_t warmup, float factor) {
  LOOM_CHECK(step >= 0, "noam_lr: step {} must be non-negative", step);
  LOOM_CHECK(d_model > 0 && warmup > 0, "noam_lr: d_model {} and warmup {} must be positive",
             d_model, warmup);
  LOOM_CHECK(std::isfinite(factor) && factor > 0.0f, "noam_lr: factor {} must be positive", factor);
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(warmup);
  return static_cast<float>(factor / std::sqrt(static_cast<double>(d_model)) *
                            std::min(1.0 / std::sqrt(s), s * std::pow(w, -1.5)));
}

float warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, float peak, float floor) {
  check_warmup_args("warmup_cosine_lr", step, warmup, total, peak);
  LOOM_CHECK(floor >= 0.0f && floor <= peak, "warmup_cosine_lr: floor {} must be in [0, peak = {}]",
             floor, peak);
  if (step < warmup) return static_cast<float>(peak * warmup_fraction(step, warmup));
  if (step >= total) return floor;
  const double progress =
      static_cast<double>(step - warmup) / static_cast<double>(total - warmup);  // in [0, 1)
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));     // 1 -> 0
  return static_cast<float>(floor + (static_cast<double>(peak) - floor) * cosine);
}

float warmup_linear_lr(int64_t step, int64_t warmup, int64_t total, float peak) {
  check_warmup_args("warmup_linear_lr", step, warmup, total, peak);
  if (step < warmup) return static_cast<float>(peak * warmup_fraction(step, warmup));
  if (step >= total) return 0.0f;
  return static_cast<float>(peak * static_cast<double>(total - step) /
                            static_cast<double>(total - warmup));
}

}  // namespace loom::optim
