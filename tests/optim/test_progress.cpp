// ProgressMeter: the mean loss of the steps since the last line, and the line's format; TimeBudget:
// the --minutes plan of the trainers.
#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "report/progress.h"
#include "test_util.h"

using namespace loom;
using loom::testing::expect_error;

TEST_CASE("ProgressMeter: each line averages the losses since the previous one") {
  optim::ProgressMeter meter(/*tokens_per_step=*/2048);
  meter.add(4.0);
  meter.add(2.0);
  const std::string first = meter.line(2, 10, 5e-4);
  CHECK(first.rfind("step     2/10 | loss 3.0000 | lr 5.00e-04 | ", 0) == 0);
  CHECK(first.find(" tok/s | ") != std::string::npos);
  CHECK(first.find(" | ETA ") != std::string::npos);
  meter.add(1.5);
  CHECK(meter.line(3, 10, 1e-3).rfind("step     3/10 | loss 1.5000 | lr 1.00e-03 | ", 0) == 0);
  // A total not known yet (a --minutes run before its plan at step 21): no made-up ETA.
  meter.add(1.0);
  const std::string unplanned = meter.line(20, 0, 1e-3);
  CHECK(unplanned.rfind("step    20/? | loss 1.0000 | ", 0) == 0);
  CHECK(unplanned.ends_with(" | ETA ?"));
  expect_error([] { optim::ProgressMeter bad(0); }, {"ProgressMeter", "0"});
}

TEST_CASE("format_duration: seconds below a minute, m:ss above") {
  CHECK(optim::format_duration(0.2) == "0s");
  CHECK(optim::format_duration(44.6) == "45s");
  CHECK(optim::format_duration(59.4) == "59s");
  CHECK(optim::format_duration(60.0) == "1m00s");
  CHECK(optim::format_duration(544.0) == "9m04s");
}

TEST_CASE("TimeBudget: plans at step 21 from the speed of steps 2-21, then revises every 20") {
  optim::TimeBudget budget(/*minutes=*/1.0);
  CHECK(budget.active());
  // Step 1 takes 5 s (one-off costs), then 0.5 s a step: steps 2..21 end at 15 s.
  CHECK_FALSE(budget.observe(1, 5.0).has_value());
  for (int64_t done = 2; done <= 20; ++done)
    CHECK_FALSE(budget.observe(done, 5.0 + 0.5 * static_cast<double>(done - 1)).has_value());
  const auto planned = budget.observe(21, 15.0);
  REQUIRE(planned.has_value());
  CHECK(budget.seconds_per_step() == doctest::Approx(0.5));
  CHECK(budget.window_steps() == 20);
  CHECK(*planned == 21 + 90);  // 45 s left at 0.5 s a step
  // The machine slows to 1 s a step: no plan between revisions; at step 41 the speed of steps
  // 2..41 is 30 s / 40 = 0.75 s, and 25 s are left: 33 more steps.
  double seconds = 15.0;
  for (int64_t done = 22; done <= 40; ++done)
    CHECK_FALSE(budget.observe(done, seconds += 1.0).has_value());
  CHECK(budget.observe(41, seconds += 1.0) == std::optional<int64_t>(41 + 33));
  CHECK(budget.seconds_per_step() == doctest::Approx(0.75));
  CHECK(budget.window_steps() == 40);
}

TEST_CASE("TimeBudget: revisions use the latest 200 steps, and end the run when time is up") {
  optim::TimeBudget budget(/*minutes=*/10.0);  // 600 s
  double seconds = 0;
  std::optional<int64_t> planned;
  for (int64_t done = 1; done <= 421; ++done) {  // 1 s a step up to 221, then 0.25 s
    seconds += done <= 221 ? 1.0 : 0.25;
    planned = budget.observe(done, seconds);
  }
  // Steps 222..421 (the window since step 221) took 50 s; 600 - 271 = 329 s left at 0.25 s.
  REQUIRE(planned.has_value());
  CHECK(budget.window_steps() == 200);
  CHECK(budget.seconds_per_step() == doctest::Approx(0.25));
  CHECK(*planned == 421 + 1316);
  for (int64_t done = 422; done <= 441; ++done) planned = budget.observe(done, seconds += 20.0);
  CHECK(planned == std::optional<int64_t>(441));  // 671 s: spent, stop at once
}

TEST_CASE("TimeBudget: work units weigh steps of unequal cost") {
  optim::TimeBudget budget(/*minutes=*/1.0);
  double seconds = 0;
  std::optional<int64_t> planned;
  for (int64_t done = 1; done <= 21; ++done) {  // alternating 0.5 and 1.5 units, 0.1 s a unit
    const double work = done % 2 == 0 ? 0.5 : 1.5;
    planned = budget.observe(done, seconds += 0.1 * work, work);
  }
  REQUIRE(planned.has_value());
  CHECK(budget.seconds_per_step() == doctest::Approx(0.1));  // per unit = per average step
  CHECK(*planned == 21 + static_cast<int64_t>((60.0 - seconds) / 0.1));
  CHECK_THROWS_WITH_AS(budget.observe(22, seconds, -1.0), doctest::Contains("work of step 22"),
                       Error);
}

TEST_CASE("TimeBudget: a spent budget still runs one more step; zero minutes plans nothing") {
  optim::TimeBudget late(/*minutes=*/0.1);  // 6 s, already past at step 21
  late.observe(1, 1.0);
  CHECK(late.observe(21, 30.0) == std::optional<int64_t>(22));
  optim::TimeBudget off(0.0);
  CHECK_FALSE(off.active());
  off.observe(1, 1.0);
  CHECK_FALSE(off.observe(21, 2.0).has_value());
  expect_error([] { optim::TimeBudget bad(-1.0); }, {"TimeBudget", "-1"});
}
