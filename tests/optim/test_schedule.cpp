// Each learning-rate schedule equals its formula, written out here in double, at the edges that
// matter: step 0 and 1, just before and at the end of warmup, mid-decay, at and past `total`.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "test_util.h"

using namespace loom;

namespace {

// Vaswani et al. 2017, eq. (3): d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
double noam_formula(double step, double d_model, double warmup, double factor) {
  return factor * std::pow(d_model, -0.5) *
         std::min(std::pow(step, -0.5), step * std::pow(warmup, -1.5));
}

double cosine_formula(double step, double warmup, double total, double peak, double floor) {
  if (step < warmup) return peak * step / warmup;
  if (step >= total) return floor;
  const double progress = (step - warmup) / (total - warmup);
  return floor + (peak - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

double linear_formula(double step, double warmup, double total, double peak) {
  if (step < warmup) return peak * step / warmup;
  return peak * std::max(0.0, (total - step) / (total - warmup));
}

void check_lr(float actual, double expected, int64_t step) {
  CAPTURE(step);
  CHECK(actual == doctest::Approx(expected).epsilon(1e-6));
}

}  // namespace

TEST_CASE("noam_lr matches Vaswani et al.'s formula") {
  const int64_t d_model = 512, warmup = 4000;
  for (int64_t step : {1, 2, 100, 3999, 4000, 4001, 10000, 1000000}) {
    check_lr(optim::noam_lr(step, d_model, warmup), noam_formula(step, d_model, warmup, 1.0), step);
    check_lr(optim::noam_lr(step, d_model, warmup, 2.0f), noam_formula(step, d_model, warmup, 2.0),
             step);
  }
  // Step 0 is taken as step 1, so the first update is not wasted at lr 0.
  CHECK(optim::noam_lr(0, d_model, warmup) == optim::noam_lr(1, d_model, warmup));
  // The two branches meet at the end of warmup: the peak is d_model^-0.5 * warmup^-0.5.
  check_lr(optim::noam_lr(warmup, d_model, warmup), 1.0 / std::sqrt(double(d_model * warmup)),
           warmup);
  CHECK(optim::noam_lr(warmup - 1, d_model, warmup) < optim::noam_lr(warmup, d_model, warmup));
  CHECK(optim::noam_lr(warmup + 1, d_model, warmup) < optim::noam_lr(warmup, d_model, warmup));
}

TEST_CASE("warmup_cosine_lr matches linear warmup + half-cosine decay") {
  const int64_t warmup = 10, total = 110;
  const float peak = 6e-4f, floor = 6e-5f;
  for (int64_t step : {0, 1, 5, 9, 10, 11, 60, 109, 110, 111, 1000}) {
    check_lr(optim::warmup_cosine_lr(step, warmup, total, peak, floor),
             cosine_formula(step, warmup, total, peak, floor), step);
    check_lr(optim::warmup_cosine_lr(step, warmup, total, peak),
             cosine_formula(step, warmup, total, peak, 0.0), step);
  }
  CHECK(optim::warmup_cosine_lr(0, warmup, total, peak, floor) == 0.0f);
  CHECK(optim::warmup_cosine_lr(warmup, warmup, total, peak, floor) == peak);
  // Halfway through the decay the cosine term is 1/2.
  check_lr(optim::warmup_cosine_lr((warmup + total) / 2, warmup, total, peak, floor),
           (double(peak) + floor) / 2, (warmup + total) / 2);
  CHECK(optim::warmup_cosine_lr(total, warmup, total, peak, floor) == floor);
  CHECK(optim::warmup_cosine_lr(total + 5, warmup, total, peak, floor) == floor);
  // No warmup: starts at the peak.
  CHECK(optim::warmup_cosine_lr(0, 0, total, peak) == peak);
}

TEST_CASE("warmup_linear_lr matches BERT's linear warmup + linear decay") {
  const int64_t warmup = 100, total = 1000;
  const float peak = 1e-4f;
  for (int64_t step : {0, 1, 50, 99, 100, 101, 550, 999, 1000, 1001, 5000}) {
    check_lr(optim::warmup_linear_lr(step, warmup, total, peak),
             linear_formula(step, warmup, total, peak), step);
  }
  CHECK(optim::warmup_linear_lr(0, warmup, total, peak) == 0.0f);
  CHECK(optim::warmup_linear_lr(warmup, warmup, total, peak) == peak);
  CHECK(optim::warmup_linear_lr(total, warmup, total, peak) == 0.0f);
  CHECK(optim::warmup_linear_lr(total + 1, warmup, total, peak) == 0.0f);
  CHECK(optim::warmup_linear_lr(0, 0, total, peak) == peak);
}

TEST_CASE("warmup == total decays straight to the end value") {
  CHECK(optim::warmup_cosine_lr(5, 5, 5, 1.0f, 0.1f) == 0.1f);
  CHECK(optim::warmup_linear_lr(5, 5, 5, 1.0f) == 0.0f);
  check_lr(optim::warmup_cosine_lr(4, 5, 5, 1.0f, 0.1f), 4.0 / 5.0, 4);
}

TEST_CASE("schedules reject invalid arguments with loom::Error") {
  CHECK_THROWS_WITH_AS(optim::noam_lr(-1, 512, 4000), doctest::Contains("noam_lr: step -1"), Error);
  CHECK_THROWS_WITH_AS(optim::noam_lr(1, 0, 4000), doctest::Contains("d_model 0"), Error);
  CHECK_THROWS_WITH_AS(optim::noam_lr(1, 512, 0), doctest::Contains("warmup 0"), Error);
  CHECK_THROWS_WITH_AS(optim::noam_lr(1, 512, 10, -1.0f), doctest::Contains("factor -1"), Error);
  CHECK_THROWS_WITH_AS(optim::warmup_cosine_lr(-3, 10, 100, 1e-3f),
                       doctest::Contains("warmup_cosine_lr: step -3"), Error);
  CHECK_THROWS_WITH_AS(optim::warmup_cosine_lr(0, 100, 10, 1e-3f),
                       doctest::Contains("warmup 100 and total 10"), Error);
  CHECK_THROWS_WITH_AS(optim::warmup_cosine_lr(0, 10, 100, 0.0f),
                       doctest::Contains("peak learning rate 0"), Error);
  CHECK_THROWS_WITH_AS(optim::warmup_cosine_lr(0, 10, 100, 1e-3f, 1e-2f),
                       doctest::Contains("floor 0.01"), Error);
  CHECK_THROWS_WITH_AS(optim::warmup_linear_lr(0, -1, 100, 1e-3f),
                       doctest::Contains("warmup_linear_lr: need 0 <= warmup <= total"), Error);
}
