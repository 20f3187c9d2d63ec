// The exercise of docs/learn/11-detr.md: DETR's matching cost (models/detr_loss.cpp,
// cost_matrix). Carion et al. 2020, eq. 1 and sec. A.1: the matching minimises, over one-to-one
// assignments of targets to queries, the sum of
//   cost_class * (-p_q(c_j)) + cost_bbox * ||b_q - b_j||_1 + cost_giou * (-GIoU(b_q, b_j)).
// The cost is written out here pair by pair in double, GIoU included, and every assignment is
// tried: the one hungarian_match returns must cost the least, for each term alone and together.
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/detr_loss.h"
#include "test_util.h"

using namespace loom;
using namespace loom::testing;

namespace {

// GIoU of two (cx, cy, w, h) boxes (Rezatofighi et al. 2019, algorithm 1).
double giou(const float* a, const float* b) {
  const double ax0 = a[0] - a[2] / 2.0, ay0 = a[1] - a[3] / 2.0;
  const double ax1 = a[0] + a[2] / 2.0, ay1 = a[1] + a[3] / 2.0;
  const double bx0 = b[0] - b[2] / 2.0, by0 = b[1] - b[3] / 2.0;
  const double bx1 = b[0] + b[2] / 2.0, by1 = b[1] + b[3] / 2.0;
  const double iw = std::max(0.0, std::min(ax1, bx1) - std::max(ax0, bx0));
  const double ih = std::max(0.0, std::min(ay1, by1) - std::max(ay0, by0));
  const double inter = iw * ih;
  const double uni = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter;
  const double hull = (std::max(ax1, bx1) - std::min(ax0, bx0)) *
                      (std::max(ay1, by1) - std::min(ay0, by0));
  return inter / uni - (hull - uni) / hull;
}

// The cost of giving target j (label, box) to a query (its logits over classes + 1, its box).
double pair_cost(const float* logits, int64_t classes, const float* box, int64_t label,
                 const float* target_box, const models::DETRLossConfig& c) {
  double top = logits[0], total = 0.0;
  for (int64_t k = 1; k <= classes; ++k) top = std::max(top, static_cast<double>(logits[k]));
  for (int64_t k = 0; k <= classes; ++k) total += std::exp(logits[k] - top);
  const double prob = std::exp(logits[label] - top) / total;
  double l1 = 0.0;
  for (int k = 0; k < 4; ++k) l1 += std::fabs(static_cast<double>(box[k]) - target_box[k]);
  return -c.cost_class * prob + c.cost_bbox * l1 - c.cost_giou * giou(box, target_box);
}

}  // namespace

TEST_CASE("hungarian_match minimises DETR's matching cost over every assignment, term by term") {
  manual_seed(23);
  const int64_t B = 2, Q = 6, classes = 4;
  const Tensor logits = randn({B, Q, classes + 1}) * 2.0f;
  const Tensor boxes = cat({rand({B, Q, 2}) * 0.5f + 0.25f, rand({B, Q, 2}) * 0.4f + 0.05f}, -1);
  std::vector<models::DETRTarget> targets;
  for (int64_t n : {3, 4})
    targets.push_back({randint(0, classes, {n}),
                       cat({rand({n, 2}) * 0.5f + 0.25f, rand({n, 2}) * 0.4f + 0.05f}, -1)});
  const std::vector<float> l = logits.to_vector(), b = boxes.to_vector();
  // Each term alone (a wrong term then changes the assignment), then DETR's weights.
  const std::vector<models::DETRLossConfig> configs = {
      {classes, 1, 0, 0}, {classes, 0, 1, 0}, {classes, 0, 0, 1}, {classes, 1, 5, 2}};
  for (const models::DETRLossConfig& config : configs) {
    CAPTURE(config.cost_class);
    CAPTURE(config.cost_bbox);
    CAPTURE(config.cost_giou);
    const std::vector<models::DETRMatch> matches =
        models::hungarian_match(logits, boxes, targets, config);
    REQUIRE(matches.size() == static_cast<size_t>(B));
    for (int64_t i = 0; i < B; ++i) {
      const std::vector<int64_t> labels = targets[i].labels.to_vector_i64();
      const std::vector<float> t = targets[i].boxes.to_vector();
      const auto n = static_cast<int64_t>(labels.size());
      auto cost = [&](int64_t q, int64_t j) {
        const size_t row = static_cast<size_t>(i * Q + q);
        return pair_cost(&l[row * (classes + 1)], classes, &b[row * 4], labels[j], &t[j * 4],
                         config);
      };
      // Every injective choice of queries for targets 0..n-1: the first n of each permutation
      // (each choice appears (Q - n)! times, which costs nothing but time).
      std::vector<int64_t> order(static_cast<size_t>(Q));
      for (int64_t q = 0; q < Q; ++q) order[q] = q;
      double best = INFINITY;
      do {
        double total = 0.0;
        for (int64_t j = 0; j < n; ++j) total += cost(order[j], j);
        best = std::min(best, total);
      } while (std::next_permutation(order.begin(), order.end()));
      const models::DETRMatch& m = matches[i];
      REQUIRE(m.queries.size() == static_cast<size_t>(n));
      REQUIRE(m.targets.size() == static_cast<size_t>(n));
      CHECK(std::is_sorted(m.queries.begin(), m.queries.end()));
      std::vector<int64_t> seen = m.targets;
      std::sort(seen.begin(), seen.end());
      for (int64_t j = 0; j < n; ++j) CHECK(seen[j] == j);  // every target once
      double chosen = 0.0;
      for (size_t k = 0; k < m.queries.size(); ++k) chosen += cost(m.queries[k], m.targets[k]);
      CAPTURE(i);
      CHECK(chosen == doctest::Approx(best).epsilon(1e-5));
    }
  }
}
