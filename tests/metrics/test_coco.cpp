// COCO box AP: hand-computed cases (those bench/reference checks its own AP code with, plus
// COCOeval's tie rules), a replica of pycocotools' COCOeval on random scenes
// (tests/golden/gen_metrics.py) to 1e-9, and the error paths.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "metrics/coco.h"

namespace metrics = loom::metrics;
using metrics::Box;

namespace {

void check_ap(const metrics::APResult& got, double ap, double ap50, double ap75) {
  CHECK(got.ap == doctest::Approx(ap).epsilon(1e-12));
  CHECK(got.ap50 == doctest::Approx(ap50).epsilon(1e-12));
  CHECK(got.ap75 == doctest::Approx(ap75).epsilon(1e-12));
}

Box det(int64_t image, int64_t label, float x0, float y0, float x1, float y1, float score) {
  return {image, label, x0, y0, x1, y1, score};
}
Box gt(int64_t image, int64_t label, float x0, float y0, float x1, float y1) {
  return {image, label, x0, y0, x1, y1, 1.0f};
}

const std::vector<Box> kTwoGt = {gt(0, 3, 0, 0, 10, 10), gt(0, 3, 20, 20, 40, 40)};

}  // namespace

TEST_CASE("coco_average_precision: perfect detections score 1") {
  check_ap(metrics::coco_average_precision(
               {det(0, 3, 0, 0, 10, 10, .9f), det(0, 3, 20, 20, 40, 40, .8f)}, kTwoGt),
           1, 1, 1);
}

TEST_CASE("coco_average_precision: a false positive ranked first or second") {
  // first: tp/fp 0/1, 1/1, 2/1 -> precision 0, .5, 2/3, made non-increasing: 2/3 everywhere
  check_ap(metrics::coco_average_precision({det(0, 3, 50, 50, 60, 60, .95f),
                                            det(0, 3, 0, 0, 10, 10, .9f),
                                            det(0, 3, 20, 20, 40, 40, .8f)},
                                           kTwoGt),
           2.0 / 3, 2.0 / 3, 2.0 / 3);
  // second: precision 1, .5, 2/3 -> 1 up to recall .5 (51 points), 2/3 above (50 points)
  const double want = (51 + 50 * 2.0 / 3) / 101;
  check_ap(metrics::coco_average_precision({det(0, 3, 0, 0, 10, 10, .9f),
                                            det(0, 3, 50, 50, 60, 60, .8f),
                                            det(0, 3, 20, 20, 40, 40, .7f)},
                                           kTwoGt),
           want, want, want);
}

TEST_CASE("coco_average_precision: IoU .72 matches at thresholds .50 to .70 only") {
  check_ap(metrics::coco_average_precision({det(0, 1, 0, 0, 10, 7.2f, .5f)},
                                           {gt(0, 1, 0, 0, 10, 10)}),
           0.5, 1, 0);
  CHECK(metrics::coco_box_iou(det(0, 1, 0, 0, 10, 7.2f, .5f), gt(0, 1, 0, 0, 10, 10)) ==
        doctest::Approx(0.72).epsilon(1e-6));
  CHECK(metrics::coco_box_iou(det(0, 1, 0, 0, 10, 10, 1), gt(0, 1, 10, 0, 20, 10)) == 0.0);
}

TEST_CASE("coco_average_precision: a duplicate below the true positive costs nothing") {
  check_ap(metrics::coco_average_precision(
               {det(0, 1, 0, 0, 10, 10, .9f), det(0, 1, 0, 0, 10, 10, .8f)},
               {gt(0, 1, 0, 0, 10, 10)}),
           1, 1, 1);
}

TEST_CASE("coco_average_precision: categories without ground truth are not averaged") {
  // class 3 found (AP 1), class 5 missed (AP 0), class 7 has detections only (skipped)
  check_ap(metrics::coco_average_precision(
               {det(0, 3, 0, 0, 10, 10, .9f), det(0, 7, 20, 20, 40, 40, .8f)},
               {gt(0, 3, 0, 0, 10, 10), gt(0, 5, 20, 20, 40, 40)}),
           0.5, 0.5, 0.5);
  // two images: image 1's box missed, its false positive scores highest -> .5 to recall .5
  const double want = 51 * .5 / 101;
  check_ap(metrics::coco_average_precision(
               {det(0, 2, 0, 0, 10, 10, .6f), det(1, 2, 50, 50, 60, 60, .7f)},
               {gt(0, 2, 0, 0, 10, 10), gt(1, 2, 20, 20, 40, 40)}),
           want, want, want);
}

TEST_CASE("coco_average_precision: no ground truth gives -1; ground truth alone gives 0") {
  check_ap(metrics::coco_average_precision({}, {}), -1, -1, -1);
  check_ap(metrics::coco_average_precision({det(4, 1, 0, 0, 5, 5, .9f)}, {}), -1, -1, -1);
  check_ap(metrics::coco_average_precision({}, {gt(4, 1, 0, 0, 5, 5)}), 0, 0, 0);
}

TEST_CASE("coco_average_precision: tied scores keep input order within an image, ids across") {
  const std::vector<Box> truth = {gt(0, 1, 0, 0, 10, 10)};
  const Box fp = det(0, 1, 50, 50, 60, 60, .5f), tp = det(0, 1, 0, 0, 10, 10, .5f);
  check_ap(metrics::coco_average_precision({fp, tp}, truth), .5, .5, .5);  // fp ranked first
  check_ap(metrics::coco_average_precision({tp, fp}, truth), 1, 1, 1);
  // across images the concatenation is by image id (COCOeval's accumulate), not input order
  const std::vector<Box> truth1 = {gt(1, 1, 0, 0, 10, 10)};
  const Box tp1 = det(1, 1, 0, 0, 10, 10, .5f), fp0 = det(0, 1, 50, 50, 60, 60, .5f);
  check_ap(metrics::coco_average_precision({tp1, fp0}, truth1), .5, .5, .5);
}

TEST_CASE("coco_average_precision: equal IoU with two boxes goes to the later box") {
  // det 1 has IoU 9/11 with both A and B and takes B (the later); det 2 (= B) then has only A
  // left, at IoU 2/3: both match at thresholds .50-.65; det 1 alone at .70-.80 (AP 51/101);
  // det 2 alone, ranked second, at .85-.95 (AP 25.5/101). Were A taken first, det 2 would match
  // B (IoU 1) at every threshold.
  const std::vector<Box> truth = {gt(0, 1, 0, 0, 10, 10), gt(0, 1, 2, 0, 12, 10)};
  const auto got = metrics::coco_average_precision(
      {det(0, 1, 1, 0, 11, 10, .9f), det(0, 1, 2, 0, 12, 10, .8f)}, truth);
  check_ap(got, (4 + 3 * 51.0 / 101 + 3 * 25.5 / 101) / 10, 1, 51.0 / 101);
}

TEST_CASE("coco_average_precision equals a replica of pycocotools' COCOeval on random scenes") {
  std::ifstream in(std::string(LOOM_TEST_DATA) + "/metrics_golden.txt");
  REQUIRE(in.good());
  std::string line;
  int cases = 0;
  const auto read_box = [&](const char* tag, bool scored) {
    std::string l;
    REQUIRE(std::getline(in, l));
    std::istringstream f(l);
    std::string t;
    double v[5] = {0, 0, 0, 0, 1};
    Box b{};
    f >> t >> b.image >> b.label >> v[0] >> v[1] >> v[2] >> v[3];
    if (scored) f >> v[4];
    REQUIRE(t == tag);
    REQUIRE(!f.fail());
    b.x0 = static_cast<float>(v[0]), b.y0 = static_cast<float>(v[1]);
    b.x1 = static_cast<float>(v[2]), b.y1 = static_cast<float>(v[3]);
    b.score = static_cast<float>(v[4]);
    return b;
  };
  while (std::getline(in, line)) {
    if (line.rfind("coco\t", 0) != 0) continue;
    std::istringstream f(line.substr(5));
    size_t nd = 0, ng = 0;
    double ap = 0, ap50 = 0, ap75 = 0;
    f >> nd >> ng >> ap >> ap50 >> ap75;
    std::vector<Box> dets, gts;
    for (size_t i = 0; i < nd; ++i) dets.push_back(read_box("det", true));
    for (size_t i = 0; i < ng; ++i) gts.push_back(read_box("gt", false));
    const auto got = metrics::coco_average_precision(dets, gts);
    CHECK(got.ap == doctest::Approx(ap).epsilon(1e-9));
    CHECK(got.ap50 == doctest::Approx(ap50).epsilon(1e-9));
    CHECK(got.ap75 == doctest::Approx(ap75).epsilon(1e-9));
    ++cases;
  }
  CHECK(cases == 7);
}

TEST_CASE("coco_average_precision: degenerate or non-finite boxes and scores throw") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto throws = [](std::vector<Box> d, std::vector<Box> g, const std::string& piece) {
    try {
      metrics::coco_average_precision(d, g);
      FAIL("no loom::Error");
    } catch (const loom::Error& e) {
      const std::string msg = e.what();
      CHECK_MESSAGE(msg.find("coco_average_precision") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find(piece) != std::string::npos, msg);
    }
  };
  throws({det(0, 1, 5, 0, 5, 10, .5f)}, {}, "detections[0] is degenerate");
  throws({}, {gt(0, 1, 0, 0, 10, 10), gt(0, 1, 0, 10, 10, 2)}, "ground_truth[1] is degenerate");
  throws({det(0, 1, nan, 0, 5, 10, .5f)}, {}, "detections[0] has a non-finite value");
  throws({det(0, 1, 0, 0, 5, 10, nan)}, {}, "non-finite");
  throws({}, {gt(0, 1, 0, 0, std::numeric_limits<float>::infinity(), 10)}, "non-finite");
}
