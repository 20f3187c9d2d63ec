// ProgressMeter: the mean loss of the steps since the last line, and the line's format.
#include <doctest/doctest.h>

#include <string>

#include "optim/progress.h"
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
  expect_error([] { optim::ProgressMeter bad(0); }, {"ProgressMeter", "0"});
}

TEST_CASE("format_duration: seconds below a minute, m:ss above") {
  CHECK(optim::format_duration(0.2) == "0s");
  CHECK(optim::format_duration(44.6) == "45s");
  CHECK(optim::format_duration(59.4) == "59s");
  CHECK(optim::format_duration(60.0) == "1m00s");
  CHECK(optim::format_duration(544.0) == "9m04s");
}
