// report/confusion.h: a classifier's accuracy and its confusion matrix, printed and drawn.
#include "test_util.h"

using namespace loom;

TEST_CASE("accuracy: the share of predictions equal to their labels") {
  CHECK(data::accuracy({0, 1, 2, 2}, {0, 1, 1, 2}) == 0.75);
  CHECK(data::accuracy({1}, {1, 0, 0}) == 1.0);  // over the predictions given
  CHECK_THROWS_WITH_AS(data::accuracy({}, {1}), doctest::Contains("accuracy: 0 predictions"),
                       Error);
}

TEST_CASE("report_confusion: a heat map of the classes, and a misfit label named") {
  testing::TempDir dir;
  const std::string png = dir.file("confusion.png");
  data::report_confusion({0, 1, 1, 0}, {0, 1, 0, 0}, {"zero", "one"}, png);
  CHECK(data::read_image(png).width > 0);
  CHECK_THROWS_WITH_AS(data::report_confusion({0, 2}, {0, 1}, {"zero", "one"}, png),
                       doctest::Contains("prediction 2 of example 1 is not one of 2 classes"),
                       Error);
}
